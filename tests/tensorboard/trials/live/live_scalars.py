"""A Core API trial that writes one TensorBoard scalar and reports one metric every 0.2 s until it is
stopped: TensorBoard files reach storage while it runs (``tensorboard_mode=AUTO``)."""

from __future__ import annotations

import sys
import time
import types

import determined as det

# TensorBoard's own writer, without importing TensorFlow.
sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))
from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402

with det.core.init() as core_context:
    writer = EventFileWriter(str(core_context.train.get_tensorboard_path()))
    step = 0
    while not core_context.preempt.should_preempt():
        step += 1
        value = summary_pb2.Summary.Value(tag="live", simple_value=float(step))
        writer.add_event(
            event_pb2.Event(
                wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])
            )
        )
        writer.flush()
        core_context.train.report_training_metrics(step, {"live": float(step)})
        time.sleep(0.2)
    writer.close()
