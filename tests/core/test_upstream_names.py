"""Upstream Determined 0.38.1 names added for issue 21: ``det.TrialContext``, ``det.util``,
``det.errors``, ``det.import_from_path``, ``determined.common.api`` (sessions, bindings, errors),
the collectives' ``stuff`` argument, the ``Dummy*`` context classes and ``SearcherContextMissing``.

The parameter lists below were read from upstream's ``harness/determined`` at 0.38.1 and are
checked in as literals (``name=`` has a default, ``*`` starts keyword-only parameters).
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import determined as det
from determined import core
from determined.common import api
from determined.common.api import bindings, errors
from determined.storage import build

UPSTREAM_PARAMS: dict[str, list[str]] = {
    "core.DistributedContext.allgather": ["stuff"],
    "core.DistributedContext.gather": ["stuff"],
    "core.DistributedContext.broadcast": ["stuff"],
    "core.DistributedContext.allgather_local": ["stuff"],
    "core.DistributedContext.gather_local": ["stuff"],
    "core.DistributedContext.broadcast_local": ["stuff="],
    "core.DummyDistributedContext": [],
    "core.DummyCheckpointContext": ["dist", "storage_manager"],
    "core.DummyTrainContext": ["tensorboard_path="],
    "core.DummyPreemptContext": ["dist", "preempt_mode="],
    "core.DummySearcherContext": ["dist", "length="],
    "core.DummySearcherOperation": ["length", "is_chief"],
    "core.DummyProfilerContext": [],
    "core.DummyExperimentalCoreContext": [],
    "core.SearcherContextMissing": [],
    "det.TrialContext": ["core_context", "env"],
    "det.EnvContext": [
        "master_url",
        "master_cert_file",
        "master_cert_name",
        "experiment_config",
        "hparams",
        "latest_checkpoint",
        "steps_completed",
        "use_gpu",
        "container_gpus",
        "slot_ids",
        "debug",
        "det_trial_id",
        "det_experiment_id",
        "det_agent_id",
        "det_cluster_id",
        "trial_seed",
        "trial_run_id",
        "allocation_id",
        "managed_training",
        "test_mode",
        "on_cluster",
    ],
    "det.TrialContext.from_config": ["config"],
    "det.TrialContext.get_hparam": ["name"],
    "det.TrialContext.set_stop_requested": ["stop_requested"],
    "det.TrialContext.get_tensorboard_path": [],
    "det.TrialContext.get_initial_batch": [],
    "det.import_from_path": ["path"],
    "det.InvalidHP": ["msg="],
    "det.util.merge_dicts": ["base_dict", "source_dict"],
    "det.util.calculate_batch_sizes": ["hparams", "slots_per_trial", "trialname"],
    "det.util.make_timing_log": ["verb", "duration", "num_inputs", "num_batches"],
    "det.util.make_metrics": ["num_inputs", "batch_metrics"],
    "det.util.json_encode": ["obj", "indent=", "sort_keys="],
    "det.util.rmtree_nfs_safe": ["path", "ignore_errors=", "onerror="],
    "det.util.is_overridden": ["full_method", "parent_class"],
    "det.util.has_param": ["fn", "name", "pos="],
    "det.util.download_gcs_blob_with_backoff": ["blob", "n_retries=", "max_backoff="],
    "det.util.write_user_code": ["path", "on_cluster"],
    "det.util.filter_duplicates": ["in_list", "sorter="],
    "det.util.humanize_float": ["n"],
    "det.util.check_sshd": ["peer_addr", "deadline", "port"],
    "det.util.forward_signals": ["p", "*signums", "signal_children="],
    "det.util.mask_config_dict": ["d"],
    "det.errors.InternalException": ["message"],
    "det.errors.InvalidDataTypeException": ["typ", "message"],
    "det.errors.InvalidConfigurationException": ["config", "message"],
    "api.Session": ["master", "username", "token", "cert", "max_retries="],
    "api.TaskSession": ["master", "username", "token", "cert", "max_retries="],
    "api.UnauthSession": ["master", "cert", "max_retries="],
    "api.BaseSession.get": ["path", "*", "params=", "headers=", "timeout=", "stream="],
    "api.BaseSession.delete": ["path", "*", "params=", "headers=", "timeout="],
    "api.BaseSession.post": ["path", "*", "params=", "json=", "data=", "headers=", "timeout="],
    "api.BaseSession.patch": ["path", "*", "params=", "json=", "data=", "headers=", "timeout="],
    "api.BaseSession.put": ["path", "*", "params=", "json=", "data=", "headers=", "timeout="],
    "api.BaseSession.with_retry": ["max_retries"],
    "errors.BadRequestException": ["message", "*args"],
    "errors.APIException": ["response", "*args"],
    "errors.NotFoundException": ["error_message"],
    "errors.ForbiddenException": ["message="],
    "errors.UnauthenticatedException": ["message="],
    "errors.InvalidCredentialsException": [],
    "errors.MasterNotFoundException": ["message", "*args"],
    "errors.DeleteFailedException": ["error_message"],
    "errors.BadResponseException": ["message", "*args"],
    "api.authentication.login": ["master_address", "username", "password", "cert="],
    "api.authentication.login_with_cache": [
        "master_address",
        "requested_user=",
        "password=",
        "cert=",
    ],
    "api.authentication.logout": ["master_address", "requested_user", "cert"],
    "api.authentication.login_from_task": ["master_address", "cert"],
    "api.metric.get_validation_metric": ["metric_name", "validation"],
    "api.read_paginated": ["get_with_offset", "offset=", "pages="],
    "api.get_default_master_url": [],
    "api.pprint_logs": ["logs"],
    "api.trial_logs": [
        "session",
        "trial_id",
        "head=",
        "tail=",
        "follow=",
        "agent_ids=",
        "container_ids=",
        "rank_ids=",
        "sources=",
        "stdtypes=",
        "min_level=",
        "timestamp_before=",
        "timestamp_after=",
        "search_text=",
    ],
    "api.task_logs": [
        "session",
        "task_id",
        "head=",
        "tail=",
        "follow=",
        "allocation_ids=",
        "agent_ids=",
        "container_ids=",
        "rank_ids=",
        "sources=",
        "stdtypes=",
        "min_level=",
        "timestamp_before=",
        "timestamp_after=",
    ],
    "bindings.get_GetMaster": ["session"],
    "bindings.get_GetExperiment": ["session", "*", "experimentId"],
    "bindings.post_PauseExperiment": ["session", "*", "id"],
    "bindings.get_GetCheckpoint": ["session", "*", "checkpointUuid"],
    "bindings.patch_PatchModel": ["session", "*", "body", "modelName"],
    "bindings.get_GetModelVersion": ["session", "*", "modelName", "modelVersionNum"],
    "bindings.get_GetTrialMetricsByCheckpoint": [
        "session",
        "*",
        "checkpointUuid",
        "metricGroup=",
        "trialSourceInfoType=",
    ],
    "bindings.put_PutExperiment": ["session", "*", "body", "externalExperimentId"],
    "bindings.post_CreateTrial": ["session", "*", "body"],
    "bindings.post_StartTrial": ["session", "*", "body", "trialId"],
    "bindings.get_GetExperimentTrials": [
        "session",
        "*",
        "experimentId",
        "limit=",
        "offset=",
        "orderBy=",
        "sortBy=",
        "states=",
    ],
}

NAMESPACES = {"core": core, "det": det, "api": api, "bindings": bindings, "errors": errors}


def _resolve(dotted: str) -> Any:
    head, *rest = dotted.split(".")
    value: Any = NAMESPACES[head]
    for part in rest:
        value = getattr(value, part)
    return value


def _params(obj: Any) -> list[str]:
    """The parameter list of ``obj`` in the notation of UPSTREAM_PARAMS (no self/cls)."""
    signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
    out: list[str] = []
    keyword_only_marked = False
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            out.append(f"*{parameter.name}")
            keyword_only_marked = True
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            out.append(f"**{parameter.name}")
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not keyword_only_marked:
            out.append("*")
            keyword_only_marked = True
        default = "=" if parameter.default is not parameter.empty else ""
        out.append(parameter.name + default)
    return out


@pytest.mark.parametrize("name", sorted(UPSTREAM_PARAMS))
def test_signature_matches_upstream(name: str) -> None:
    assert _params(_resolve(name)) == UPSTREAM_PARAMS[name]


# ---- core: collectives, Dummy* classes, SearcherContextMissing -----------------------------------


def test_dummy_contexts_are_the_real_classes(tmp_path: pathlib.Path) -> None:
    dist = core.DummyDistributedContext()
    storage = build({"type": "shared_fs", "host_path": str(tmp_path)})
    pairs = [
        (dist, core.DistributedContext),
        (core.DummyCheckpointContext(dist, storage), core.CheckpointContext),
        (core.DummyTrainContext(tensorboard_path=tmp_path / "tb"), core.TrainContext),
        (core.DummyPreemptContext(dist), core.PreemptContext),
        (core.DummySearcherContext(dist, length=3), core.SearcherContext),
        (core.DummySearcherOperation(3, is_chief=True), core.SearcherOperation),
        (core.DummyProfilerContext(), core.ProfilerContext),
        (core.DummyExperimentalCoreContext(), core.ExperimentalCoreContext),
        (core.SearcherContextMissing(), core.SearcherContext),
    ]
    for context, real in pairs:
        assert isinstance(context, real), (type(context), real)
    pairs[2][0]._close()  # type: ignore[attr-defined]


def test_dummy_classes_can_be_subclassed() -> None:
    class Tagged(core.DummyDistributedContext):
        def __init__(self) -> None:
            super().__init__()
            self.tag = "mine"

    dist = Tagged()
    assert dist.tag == "mine" and dist.gather(stuff="x") == ["x"]
    assert dist.allgather(stuff=1) == [1] and dist.broadcast(stuff=2) == 2
    assert dist.broadcast_local() is None and dist.gather_local(stuff=3) == [3]

    class Quiet(core.DummyPreemptContext):
        pass

    preempt = Quiet(dist, core.PreemptMode.ChiefOnly)
    preempt.start()
    assert preempt.should_preempt() is False
    preempt.close()


def test_dummy_searcher_reports_epochs_like_upstream() -> None:
    searcher = core.DummySearcherContext(core.DummyDistributedContext(), length=4)
    assert searcher.get_configured_units() == core.Unit.EPOCHS
    lengths = []
    for op in searcher.operations():
        lengths.append(op.length)
        op.report_completed(0.1)
    assert lengths == [4]


def test_searcher_context_missing_refuses_every_call() -> None:
    missing = core.SearcherContextMissing()
    for call in (missing.operations, missing.acknowledge_out_of_ops, missing.get_configured_units):
        with pytest.raises(ValueError, match="searcher.max_length"):
            call()


GATHER_WORKER = textwrap.dedent(
    """
    import json, sys
    from determined import core

    rank, port = int(sys.argv[1]), int(sys.argv[2])
    with core.DistributedContext(
        rank=rank, size=2, local_rank=rank, local_size=2, cross_rank=0, cross_size=1,
        pub_port=port, timeout=60,
    ) as dist:
        out = {
            "gather": dist.gather(stuff={"rank": rank}),
            "allgather": dist.allgather(stuff=rank * 10),
            "broadcast": dist.broadcast(stuff=f"from {rank}"),
            "gather_local": dist.gather_local(stuff=rank),
            "broadcast_local": dist.broadcast_local(stuff=rank + 100),
        }
    print(json.dumps(out))
    """
)


def test_collectives_take_stuff_by_keyword_across_processes(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(GATHER_WORKER)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), str(port)], stdout=subprocess.PIPE, text=True
        )
        for rank in (1, 0)
    ]
    results = {}
    for proc in procs:
        stdout, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        out = json.loads(stdout)
        results[0 if out["gather"] else 1] = out
    assert results[0]["gather"] == [{"rank": 0}, {"rank": 1}]
    assert results[1]["gather"] is None
    for rank in (0, 1):
        assert results[rank]["allgather"] == [0, 10]
        assert results[rank]["broadcast"] == "from 0"
        assert results[rank]["broadcast_local"] == 100
    assert results[0]["gather_local"] == [0, 1] and results[1]["gather_local"] is None


# ---- top level: lazy names, util, errors, import_from_path, TrialContext -------------------------


def test_top_level_names_load_lazily() -> None:
    code = (
        "import sys, determined as det\n"
        "lazy = ['determined.util', 'determined.errors', 'determined._trial_context',"
        " 'determined._import', 'determined.common', 'determined.lightning']\n"
        "print(','.join(m for m in lazy if m in sys.modules))\n"
        "det.util, det.errors, det.TrialContext, det.import_from_path\n"
        "print(','.join(m for m in lazy[:4] if m in sys.modules))\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    before, after, torch = result.stdout.splitlines()
    assert before == ""
    assert after.split(",") == [
        "determined.util",
        "determined.errors",
        "determined._trial_context",
        "determined._import",
    ]
    assert torch == "False"
    assert {"TrialContext", "util", "errors", "import_from_path", "lightning"} <= set(dir(det))


def test_util_helpers(caplog: pytest.LogCaptureFixture) -> None:
    base = {"a": {"b": 1, "c": 2}, "d": 3}
    merged = det.util.merge_dicts(base, {"a": {"c": 20}, "e": 5})
    assert merged == {"a": {"b": 1, "c": 20}, "d": 3, "e": 5}
    assert base == {"a": {"b": 1, "c": 2}, "d": 3}  # inputs untouched
    with caplog.at_level(logging.WARNING):
        assert det.util.calculate_batch_sizes({"global_batch_size": 7}, 2, "PyTorchTrial") == (3, 6)
    assert "changed from 7 to 6" in caplog.text
    for hparams in ({}, {"global_batch_size": 1.5}, {"global_batch_size": 1}):
        with pytest.raises(det.errors.InvalidExperimentException):
            det.util.calculate_batch_sizes(hparams, 2, "PyTorchTrial")
    assert json.loads(det.util.json_encode({"x": math.nan, "y": [math.inf], "z": b"ok"})) == {
        "x": "NaN",
        "y": ["Infinity"],
        "z": "ok",
    }
    metrics = det.util.make_metrics(4, [{"loss": 1.0, "v": [1]}, {"loss": 3.0, "v": [2]}])
    assert metrics["avg_metrics"] == {"loss": 2.0, "v": None} and metrics["num_inputs"] == 4
    with pytest.raises(ValueError, match="inconsistent"):
        det.util.validate_batch_metrics([{"a": 1}, {"b": 1}])
    assert (
        det.util.humanize_float(3.14159265) == 3.142 and det.util.humanize_float(33333.3) == 33333
    )
    assert det.util.make_timing_log("trained", 2.0, 64, 8).startswith("trained: 64 records in 2.0s")
    assert det.util.filter_duplicates([3, 1, 3, 2, 1]) == {1, 3}
    assert det.util.match_legacy_trial_class("model_def:MyTrial")
    assert not det.util.match_legacy_trial_class("train.py")
    masked = det.util.mask_config_dict({"checkpoint_storage": {"type": "s3", "secret_key": "k"}})
    assert masked["checkpoint_storage"]["secret_key"] == "********"
    assert det.util.is_numerical_scalar(1.5) and not det.util.is_numerical_scalar("1.5")


def test_errors_follow_upstream() -> None:
    assert issubclass(det.errors.InvalidExperimentException, BaseException)
    assert not issubclass(det.errors.InvalidExperimentException, Exception)
    assert str(det.errors.InvalidDataTypeException(int, "bad")) == "Invalid data type (int): bad."
    assert "Internal error: oops" in str(det.errors.InternalException("oops"))
    from determined.storage import CheckpointNotFound

    assert det.errors.CheckpointNotFound is CheckpointNotFound


def test_import_from_path_imports_an_older_copy(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current, old = tmp_path / "current", tmp_path / "checkpoint_code"
    for directory, value in ((current, "new"), (old, "old")):
        directory.mkdir()
        (directory / "model_def.py").write_text(f"VALUE = {value!r}\n")
    monkeypatch.chdir(current)
    monkeypatch.syspath_prepend(str(current))
    monkeypatch.delitem(sys.modules, "model_def", raising=False)
    import model_def  # type: ignore[import-not-found]

    assert model_def.VALUE == "new"
    with det.import_from_path(old):
        import model_def as old_model_def  # type: ignore[import-not-found]

        assert old_model_def.VALUE == "old"
        with pytest.raises(RuntimeError, match="nested"), det.import_from_path(old):
            pass
    assert sys.modules["model_def"] is model_def
    assert not (old / "__pycache__").exists()
    assert str(old) not in sys.path


def test_trial_context_from_config() -> None:
    config = {
        "hyperparameters": {"lr": {"type": "const", "val": 0.5}, "global_batch_size": 8},
        "data": {"url": "x"},
    }
    context = det.TrialContext.from_config(config)
    try:
        assert context.get_hparams() == {"global_batch_size": 8, "lr": 0.5}
        assert context.get_hparam("lr") == 0.5 and context.get_data_config() == {"url": "x"}
        assert context.get_experiment_config() == config
        assert (context.get_trial_id(), context.get_experiment_id()) == (0, 0)
        assert context.get_initial_batch() == 0
        assert context.get_tensorboard_path() == context._core.train.get_tensorboard_path()
        assert context.distributed.size == 1
        assert isinstance(context.env, det.EnvContext) and context.env.det_trial_id == "0"
        with pytest.raises(ValueError, match="no hyperparameter named 'nope'"):
            context.get_hparam("nope")
        with pytest.raises(TypeError):
            context.set_stop_requested("yes")  # type: ignore[arg-type]
        context.set_stop_requested(True)
        assert context.get_stop_requested() is True
    finally:
        context._core.close()


def test_trial_context_reads_a_cluster_info() -> None:
    trial = det.TrialInfo(
        trial_id=7,
        experiment_id=3,
        trial_seed=42,
        hparams={"lr": 0.1},
        config={"data": {"x": 1}},
        steps_completed=12,
        trial_run_id=2,
        debug=False,
        inter_node_network_interface=None,
    )
    info = det.ClusterInfo(
        master_url="http://127.0.0.1:8080",
        cluster_id="cluster",
        agent_id="agent",
        slot_ids=[0],
        task_id="task",
        allocation_id="alloc",
        session_token="token",
        task_type="TRIAL",
        latest_checkpoint="some-uuid",
        trial_info=trial,
    )
    with core._dummy_init() as core_context:
        context = det.TrialContext(core_context, info)
        assert isinstance(context.env, det.EnvContext)
        assert (context.get_trial_id(), context.get_experiment_id()) == (7, 3)
        assert context.get_trial_seed() == 42 and context.get_initial_batch() == 12
        assert context.get_hparams() == {"lr": 0.1} and context.get_data_config() == {"x": 1}
        assert context.env.latest_checkpoint == "some-uuid" and context.env.on_cluster


# ---- determined.common.api against a real master ---------------------------------------------


@pytest.fixture(scope="module")
def session(module_master: Any) -> api.Session:
    from determined.common.api import authentication

    return authentication.login(module_master.url, "determined", "")  # caches no token


def _unreachable_url() -> str:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_session_and_bindings_talk_to_the_master(session: api.Session) -> None:
    info = session.get("/api/v1/master").json()
    assert bindings.get_GetMaster(session).version == info["version"]
    me = bindings.get_GetMe(session)
    assert isinstance(me, bindings.v1GetMeResponse) and isinstance(me.user, bindings.v1User)
    assert me.user.username == "determined"
    page = bindings.get_GetExperiments(session, limit=5, orderBy=bindings.v1OrderBy.DESC)
    assert isinstance(page.experiments, list) and page.pagination is not None
    pages = list(
        api.read_paginated(lambda offset: bindings.get_GetExperiments(session, offset=offset))
    )
    assert pages and all(isinstance(p, bindings.v1GetExperimentsResponse) for p in pages)
    with session as same:
        assert same.get("/api/v1/me").json()["user"]["username"] == "determined"


def test_unmanaged_bindings_upsert_by_external_id(
    session: api.Session, tmp_path: pathlib.Path
) -> None:
    external = f"h5-{os.getpid()}-{tmp_path.name}"
    config = json.dumps(
        {
            "name": "bindings-unmanaged",
            "searcher": {"name": "single", "metric": "loss"},
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)},
        }
    )
    request = bindings.v1CreateExperimentRequest(config=config, unmanaged=True)
    first = bindings.put_PutExperiment(session, body=request, externalExperimentId=external)
    again = bindings.put_PutExperiment(session, body=request, externalExperimentId=external)
    assert isinstance(first.experiment, bindings.v1Experiment)
    assert first.experiment.id == again.experiment.id and again.experiment.unmanaged is True
    got = bindings.get_GetExperiment(session, experimentId=first.experiment.id)
    assert got.experiment.externalExperimentId == external


def test_errors_map_from_the_client(session: api.Session, module_master: Any) -> None:
    for call in (
        lambda: bindings.get_GetExperiment(session, experimentId=424242),
        lambda: session.get("/api/v1/experiments/424242"),
        lambda: bindings.get_GetCheckpoint(session, checkpointUuid="no-such-uuid"),
        lambda: bindings.get_GetTrialMetricsByCheckpoint(session, checkpointUuid="no-such-uuid"),
        lambda: bindings.get_GetTrial(session, trialId=424242),
    ):
        with pytest.raises(errors.NotFoundException) as missing:
            call()
        assert isinstance(missing.value, errors.APIException)
        assert isinstance(missing.value, errors.BadRequestException)
        assert missing.value.status_code == 404

    bogus = api.Session(module_master.url, "determined", "not-a-token", None)
    with pytest.raises(errors.UnauthenticatedException):
        bindings.get_GetMe(bogus)
    with pytest.raises(errors.UnauthenticatedException):
        api.UnauthSession(module_master.url, None).get("/api/v1/me")

    request = bindings.v1PostUserRequest(
        user=bindings.v1User(username="not-allowed", admin=False, active=True), password="Pw12345"
    )
    with pytest.raises(errors.ForbiddenException) as forbidden:
        bindings.post_PostUser(session, body=request)
    assert isinstance(forbidden.value, errors.BadRequestException)

    down = api.Session(_unreachable_url(), "determined", "token", None, max_retries=None)
    with pytest.raises(errors.MasterNotFoundException) as unreachable:
        down.get("/api/v1/master")
    assert isinstance(unreachable.value, errors.BadRequestException)
    assert isinstance(unreachable.value, ConnectionError)


def test_upstream_errors_keep_upstream_constructors() -> None:
    from determined import client

    assert str(errors.NotFoundException("gone")) == "gone"
    assert errors.NotFoundException("gone").status_code == 404
    assert str(errors.ForbiddenException("no")).startswith("Forbidden(no)")
    assert isinstance(errors.InvalidCredentialsException(), errors.UnauthenticatedException)
    raised = client.UnauthenticatedError("POST", "/login", 401, "invalid credentials")
    assert isinstance(raised, errors.InvalidCredentialsException)  # a refused login, as upstream
    assert raised.status == raised.status_code == 401


def test_authentication_logs_in_and_out(
    module_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.common.api import authentication

    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "DET_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "config"))
    url = module_master.url
    session = authentication.login(url, "determined", "")
    assert session.username == "determined" and session.get("/api/v1/me").ok
    with pytest.raises(errors.InvalidCredentialsException):
        authentication.login(url, "determined", "wrong-password")

    cached = authentication.login_with_cache(url, "determined", "")
    assert bindings.get_GetMe(cached).user.username == "determined"
    assert authentication.TokenStore().users(url) == ["determined"]
    authentication.logout_all(url, None)
    assert authentication.TokenStore().users(url) == []
    with pytest.raises(errors.UnauthenticatedException):
        bindings.get_GetMe(cached)  # the token was revoked on the master

    with pytest.raises(ValueError, match="DET_SESSION_TOKEN"):
        authentication.login_from_task(url, None)
    monkeypatch.setenv("DET_SESSION_TOKEN", "t")
    monkeypatch.setenv("DET_USER", "someone")
    task = authentication.login_from_task(url, None)
    assert (
        isinstance(task, api.TaskSession)
        and task.headers()["Grpc-Metadata-x-allocation-token"] == "Bearer t"
    )
    with pytest.raises(ValueError, match="8 characters"):
        authentication.check_password_complexity("Ab1")
    authentication.check_password_complexity("Abcdefg1")
    assert (
        api.metric.get_validation_metric("loss", {"metrics": {"validation_metrics": {"loss": 0.5}}})
        == 0.5
    )


def test_log_helpers(session: api.Session, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="at most one of head, tail, or follow"):
        list(api.trial_logs(session, 1, head=1, tail=1))
    with pytest.raises(errors.NotFoundException):
        list(api.trial_logs(session, 424242, tail=5))
    with pytest.raises(errors.NotFoundException):
        list(api.task_logs(session, "no-such-task", head=5))
    lines = [
        bindings.v1TrialLogsResponse(message="a\n"),
        bindings.v1TaskLogsResponse(message="b\n"),
    ]
    api.pprint_logs(lines)
    assert capsys.readouterr().out == "a\nb\n"
    assert api.logs.levels_at_or_above(bindings.v1LogLevel.ERROR) == [
        bindings.v1LogLevel.ERROR,
        bindings.v1LogLevel.CRITICAL,
    ]


def test_bindings_messages_round_trip() -> None:
    response = bindings.v1GetExperimentResponse.from_json(
        {"experiment": {"id": 3, "state": "STATE_PAUSED", "numTrials": 2}, "jobSummary": None}
    )
    assert response.experiment.state is bindings.experimentv1State.PAUSED
    assert str(response.experiment.state) == "PAUSED"
    assert response.experiment.numTrials == 2 and response.experiment.description is None
    assert response.to_json(omit_unset=True) == {
        "experiment": {"id": 3, "state": "STATE_PAUSED", "numTrials": 2}
    }
    with pytest.raises(TypeError, match="missing required keywords"):
        bindings.get_GetExperiment(None)  # type: ignore[arg-type]


def test_default_master_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DET_MASTER", raising=False)
    monkeypatch.delenv("DET_MASTER_ADDR", raising=False)
    assert api.get_default_master_url() == "localhost:8080"
    monkeypatch.setenv("DET_MASTER", "example:9000")
    assert api.canonicalize_master_url(api.get_default_master_url()) == "http://example:9000"
