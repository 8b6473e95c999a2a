"""One worker of a 2-worker MultiWorkerMirroredStrategy job on CPU, started by
``python -m determined.launch.tensorflow`` (one worker per CPU slot of the ClusterInfo).

``python distributed_scenario.py STORAGE``: every worker checks its DistributedContext from
``TF_CONFIG`` and the strategy's cross-worker all-reduce. Under Keras 2 (tf.keras 2.15) it then fits
with DeterminedCallback (2 epochs, a checkpoint each), resumes from the latest checkpoint in a second
``fit()`` (it must run epoch 2 only), and checks the weights agree across workers. Keras 3's ``fit()``
does not run under MultiWorkerMirroredStrategy (keras-team/keras#20585), so under Keras 3 the check
stops after the strategy's own all-reduce. Prints ``worker <rank> ok``.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import determined as det

dist, strategy = det.core.DistributedContext.from_tf_config()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main(storage: pathlib.Path) -> None:
    assert dist.size == 2 and dist.local_size == 2 and dist.cross_size == 1, dist
    assert dist.allgather(dist.rank) == [0, 1]
    assert type(strategy).__name__ in ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy")
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync

    @tf.function
    def all_reduce() -> tf.Tensor:
        def step() -> tf.Tensor:
            ctx = tf.distribute.get_replica_context()
            return ctx.all_reduce("sum", tf.constant(float(dist.rank + 1)))

        return strategy.run(step)

    total = float(strategy.experimental_local_results(all_reduce())[0])
    assert total == 3.0, total

    from determined.keras._compat import KERAS_MAJOR, keras

    if KERAS_MAJOR >= 3:
        print(f"worker {dist.rank} ok", flush=True)
        return

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = np.eye(3, dtype="float32")[(x[:, 0] > 0).astype("int64")]

    def model() -> object:
        with strategy.scope():
            m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
            m.compile(optimizer=keras.optimizers.Adam(0.05), loss="categorical_crossentropy")
        return m

    class Epochs(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[int] = []

        def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
            self.seen.append(epoch)

    with det.core.init(distributed=dist, checkpoint_storage=str(storage)) as core_context:
        first, epochs = model(), Epochs()
        callback = det.keras.DeterminedCallback(core_context, None, "job")
        first.fit(x, y, batch_size=16, epochs=2, callbacks=[callback, epochs], verbose=0)
        assert epochs.seen == [0, 1], epochs.seen
        latest = None
        if dist.rank == 0:
            found = {
                json.loads(p.read_text())["steps_completed"]: p.parent.name
                for p in storage.glob("*/metadata.json")
            }
            assert len(found) == 2, found
            latest = found[max(found)]
        latest = dist.broadcast(latest)

        second, epochs = model(), Epochs()
        callback = det.keras.DeterminedCallback(core_context, latest, "job")
        second.fit(x, y, batch_size=16, epochs=3, callbacks=[callback, epochs], verbose=0)
        assert epochs.seen == [2], epochs.seen
        kernels = dist.allgather(second.get_weights()[0].tolist())
        assert np.allclose(kernels[0], kernels[1]), kernels
    print(f"worker {dist.rank} ok", flush=True)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
