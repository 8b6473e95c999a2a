"""Upstream's ``determined.util``: the helpers Determined user code and plugins call.

Names and signatures follow Determined 0.38's ``determined.util``. numpy is optional: the helpers
that handle numpy values recognise them by their ``item``/``tolist`` methods or import numpy only
when it is already installed.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import datetime
import enum
import errno
import inspect
import json
import logging
import math
import numbers
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("determined")

_MASK = "********"


def rmtree_nfs_safe(
    path: str | os.PathLike[str],
    ignore_errors: bool = False,
    onerror: Callable[[Any, Any, Any], Any] | None = None,
) -> None:
    """``shutil.rmtree``, retried a few times when NFS reports a directory as not yet empty."""
    attempts = 5
    for attempt in range(1, attempts + 1):
        try:
            shutil.rmtree(path, ignore_errors=ignore_errors, onerror=onerror)
            return
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY or attempt == attempts:
                raise
            logger.debug("rmtree(%s) failed (%s); retrying (NFS?)", path, exc)
            time.sleep(2**attempt / 100)


def download_gcs_blob_with_backoff(blob: Any, n_retries: int = 32, max_backoff: int = 32) -> Any:
    """``blob.download_as_string()`` of a Google Cloud Storage blob, retried with exponential
    backoff (capped at ``max_backoff`` seconds) up to ``n_retries`` times.

    The jitter comes from a private generator, so the caller's ``random`` state is untouched.
    """
    download = getattr(blob, "download_as_string", None)
    if not callable(download):
        raise TypeError(f"download_gcs_blob_with_backoff: not a GCS blob: {type(blob).__name__}")
    jitter = random.Random()
    for attempt in range(n_retries):
        try:
            return download()
        except Exception as exc:  # the GCS client raises many kinds of transient errors
            logger.debug("GCS download failed (%s), attempt %d of %d", exc, attempt + 1, n_retries)
            time.sleep(min(2**attempt + jitter.random(), max_backoff))
    raise RuntimeError(f"downloading {blob!r} failed {n_retries} times")


def is_overridden(full_method: Any, parent_class: Any) -> bool:
    """Whether the bound method ``full_method`` is defined below ``parent_class``.

    A non-callable (a user attribute that shadows the method name) counts as not overridden.
    """
    if not callable(full_method):
        return False
    return bool(str(full_method.__qualname__).partition(".")[0] != parent_class.__name__)


def has_param(fn: Callable[..., Any], name: str, pos: int | None = None) -> bool:
    """Whether ``fn`` has a positional parameter ``name`` (or at least ``pos + 1`` of them)."""
    args = inspect.getfullargspec(fn).args
    if name in args:
        return True
    return pos is not None and pos < len(args)


def get_member_func(obj: Any, func_name: str) -> Any:
    """``obj.func_name`` when it is callable, else ``None``."""
    member = getattr(obj, func_name, None)
    return member if callable(member) else None


def merge_dicts(base_dict: dict[Any, Any], source_dict: dict[Any, Any]) -> dict[Any, Any]:
    """A new dict: ``base_dict`` with ``source_dict``'s values merged in, recursively for dicts.

    Neither input is modified.
    """
    merged = copy.deepcopy(base_dict)
    for key, value in source_dict.items():
        if key in base_dict and isinstance(value, dict) and isinstance(base_dict[key], dict):
            merged[key] = merge_dicts(base_dict[key], value)
        else:
            merged[key] = value
    return merged


def _list_to_dict(list_of_dicts: list[dict[str, Any]]) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = collections.defaultdict(list)
    for row in list_of_dicts:
        for key, value in row.items():
            columns[key].append(value)
    return columns


def validate_batch_metrics(batch_metrics: list[dict[str, Any]]) -> None:
    """Raise ``ValueError`` unless every batch reports the same metric names."""
    if not batch_metrics:
        return
    expected = set(batch_metrics[0])
    for index, metrics in enumerate(batch_metrics):
        if set(metrics) != expected:
            raise ValueError(
                f"inconsistent training metrics: batch {index} has {sorted(metrics)}, "
                f"batch 0 has {sorted(expected)}"
            )


def _mean(values: list[Any]) -> float | None:
    """The mean of the non-``None`` scalar values; ``None`` when any value is not a scalar."""
    present = [v for v in values if v is not None]
    total = 0.0
    for value in present:
        if hasattr(value, "item") and callable(value.item):
            try:
                value = value.item()
            except (TypeError, ValueError):
                return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        total += float(value)
    return total / len(present) if present else None


def make_metrics(num_inputs: int | None, batch_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"batch_metrics", "avg_metrics"[, "num_inputs"]}``: the batches and the mean of each
    metric over them (``None`` for metrics whose values are not scalars)."""
    validate_batch_metrics(batch_metrics)
    averages = {name: _mean(values) for name, values in _list_to_dict(batch_metrics).items()}
    metrics: dict[str, Any] = {"batch_metrics": batch_metrics, "avg_metrics": averages}
    if num_inputs is not None:
        metrics["num_inputs"] = num_inputs
    return metrics


def _jsonable(obj: Any) -> Any:
    if obj is None or isinstance(obj, str | bool):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        value = float(obj)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(obj, bytes):
        return obj.decode("utf8")
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, datetime.datetime):
        return obj.isoformat()
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if hasattr(obj, "__json__"):
        return obj.__json__()
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return _jsonable(tolist())
    raise TypeError(f"Unserializable object {obj!r} of type {type(obj)}")


def json_encode(obj: Any, indent: str | None = None, sort_keys: bool = False) -> str:
    """JSON text of ``obj``, with NaN/±Infinity as strings, numpy values as Python values,
    datetimes in ISO format, enums by name and objects with a ``__json__`` method through it."""
    return json.dumps(_jsonable(obj), indent=indent, sort_keys=sort_keys)


def write_user_code(path: pathlib.Path, on_cluster: bool) -> None:
    """Copy the model code into ``path / "code"`` (replacing an older copy), without caches.

    det runs a trial in a directory holding exactly the experiment's context, on a cluster and off
    it, so the current directory is the code in both cases (``on_cluster`` is kept for callers).
    """
    code_path = pathlib.Path(path) / "code"
    if code_path.exists():
        rmtree_nfs_safe(code_path)
    shutil.copytree(".", code_path, ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(code_path, 0o755)


def filter_duplicates(
    in_list: list[Any], sorter: Callable[[list[Any]], list[Any]] = sorted
) -> set[Any]:
    """The items that occur more than once in ``in_list`` (``sorter`` brings equal items together)."""
    duplicates = set()
    previous: Any = None
    for index, item in enumerate(sorter(in_list)):
        if index and item == previous:
            duplicates.add(item)
        previous = item
    return duplicates


def humanize_float(n: float) -> float:
    """``n`` rounded to four significant digits, never rounding its integer part."""
    if n == 0 or not math.isfinite(n):
        return n
    digits = math.ceil(math.log10(abs(n)))
    return round(n, max(digits, 4) - digits)


def make_timing_log(verb: str, duration: float, num_inputs: int, num_batches: int) -> str:
    """One log line with the records and batches per second of a timed phase."""
    records_per_s = humanize_float(num_inputs / duration if duration else math.inf)
    batches_per_s = humanize_float(num_batches / duration if duration else math.inf)
    return (
        f"{verb}: {num_inputs} records in {humanize_float(duration)}s ({records_per_s} "
        f"records/s), in {num_batches} batches ({batches_per_s} batches/s)"
    )


def calculate_batch_sizes(
    hparams: dict[str, Any], slots_per_trial: int, trialname: str
) -> tuple[int, int]:
    """``(per_slot_batch_size, effective_global_batch_size)`` from the ``global_batch_size``
    hyperparameter split over ``slots_per_trial`` slots.

    Raises:
        determined.errors.InvalidExperimentException: no integer ``global_batch_size``, or fewer
            records than slots.
    """
    from determined.errors import InvalidExperimentException

    slots = max(slots_per_trial, 1)
    if "global_batch_size" not in hparams:
        raise InvalidExperimentException(
            "set an integer `global_batch_size` hyperparameter in the experiment config: "
            f"{trialname}-based training requires it"
        )
    global_batch_size = hparams["global_batch_size"]
    if not isinstance(global_batch_size, int) or isinstance(global_batch_size, bool):
        raise InvalidExperimentException(
            "the `global_batch_size` hyperparameter must be an integer, not "
            f"{type(global_batch_size).__name__}"
        )
    if global_batch_size < slots:
        raise InvalidExperimentException(
            "the `global_batch_size` hyperparameter must be at least the number of slots; "
            f"global_batch_size={global_batch_size}, slots_per_trial={slots}"
        )
    per_slot = global_batch_size // slots
    effective = per_slot * slots
    if effective != global_batch_size:
        logger.warning(
            "`global_batch_size` changed from %d to %d to divide equally across %d slots",
            global_batch_size,
            effective,
            slots,
        )
    return per_slot, effective


def check_sshd(peer_addr: str, deadline: float, port: int) -> None:
    """Wait until an SSH server greets on ``peer_addr:port``.

    Raises:
        ValueError: none did by ``deadline`` (a ``time.time()`` value).
    """
    while True:
        with socket.socket() as sock:
            sock.settimeout(1)
            try:
                sock.connect((peer_addr, port))
                if not sock.recv(1):
                    raise OSError("no sshd greeting")
                return
            except OSError:
                if time.time() > deadline:
                    raise ValueError(
                        f"the chief could not reach sshd on the peer at {peer_addr}:{port}"
                    ) from None
        time.sleep(0.1)


_LEGACY_TRIAL_CLASS = re.compile(r"^[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+$")


def match_legacy_trial_class(arg: str) -> bool:
    """Whether an entrypoint names a Trial class (``module.submodule:ClassName``)."""
    return _LEGACY_TRIAL_CLASS.match(arg) is not None


def legacy_trial_entrypoint_to_script(trial_entrypoint: str) -> list[str]:
    """The command that runs the Trial class ``trial_entrypoint`` (det's trial launcher)."""
    return [sys.executable, "-m", "determined.launch.trial", trial_entrypoint]


def force_create_symlink(src: str, dst: str) -> None:
    """Make ``dst`` a symlink to the directory ``src`` (created if missing), replacing whatever
    ``dst`` was; losing a race with another worker is fine."""
    os.makedirs(src, exist_ok=True)
    try:
        os.symlink(src, dst, target_is_directory=True)
        return
    except FileExistsError:
        pass
    try:
        if os.path.islink(dst) or os.path.isfile(dst):
            os.unlink(dst)
        else:
            rmtree_nfs_safe(dst)
        try:
            os.symlink(src, dst, target_is_directory=True)
            os.chmod(dst, os.stat(dst).st_mode | stat.S_IWOTH)
        except FileExistsError:
            pass
    except PermissionError as exc:
        logger.warning("%s trying to remove %s", exc, dst)


def signal_process_tree(p: subprocess.Popen[Any], signum: Any) -> None:
    """Send ``signum`` to every descendant of ``p`` (not to ``p`` itself); errors are logged."""
    import psutil

    try:
        for child in psutil.Process(p.pid).children(recursive=True):
            child.send_signal(signum)
    except Exception as exc:  # a child may exit meanwhile; forwarding is best effort
        logger.error("%s trying to forward signal %s to children", exc, signum)


@contextlib.contextmanager
def forward_signals(
    p: subprocess.Popen[Any], *signums: signal.Signals, signal_children: bool = False
) -> Iterator[None]:
    """Within the block, pass the given signals (default: the usual wrapper signals) on to ``p``,
    and to all its descendants with ``signal_children``; the old handlers come back afterwards."""
    if not signums:
        names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGBREAK")
        signums = tuple(getattr(signal, name) for name in names if hasattr(signal, name))

    def passthru(signum: int, frame: Any) -> None:
        if signal_children:
            signal_process_tree(p, signum)
        p.send_signal(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, passthru)
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


def is_numerical_scalar(n: Any) -> bool:
    """Whether ``n`` is a number TensorBoard can plot: a Python or numpy number, or a 0-d numeric
    numpy array."""
    if isinstance(n, int | float) and not isinstance(n, bool):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return False
    if isinstance(n, numpy.number):
        return True
    return bool(
        isinstance(n, numpy.ndarray) and n.ndim == 0 and numpy.issubdtype(n.dtype, numpy.number)
    )


def mask_checkpoint_storage(d: dict[str, Any]) -> dict[str, Any]:
    """A copy of a ``checkpoint_storage`` config with its access keys masked."""
    masked = copy.deepcopy(d)
    for key in ("access_key", "secret_key"):
        if key in masked:
            masked[key] = _MASK
    return masked


def mask_config_dict(d: dict[str, Any]) -> dict[str, Any]:
    """A copy of an experiment config with its storage keys and registry password masked."""
    masked = copy.deepcopy(d)
    storage = masked.get("checkpoint_storage")
    if isinstance(storage, dict):
        masked["checkpoint_storage"] = mask_checkpoint_storage(storage)
    environment = masked.get("environment")
    if isinstance(environment, dict):
        registry_auth = environment.get("registry_auth")
        if isinstance(registry_auth, dict) and registry_auth.get("password") is not None:
            registry_auth["password"] = _MASK
    return masked


__all__ = [
    "calculate_batch_sizes",
    "check_sshd",
    "download_gcs_blob_with_backoff",
    "filter_duplicates",
    "force_create_symlink",
    "forward_signals",
    "get_member_func",
    "has_param",
    "humanize_float",
    "is_numerical_scalar",
    "is_overridden",
    "json_encode",
    "legacy_trial_entrypoint_to_script",
    "make_metrics",
    "make_timing_log",
    "mask_checkpoint_storage",
    "mask_config_dict",
    "match_legacy_trial_class",
    "merge_dicts",
    "rmtree_nfs_safe",
    "signal_process_tree",
    "validate_batch_metrics",
    "write_user_code",
]
