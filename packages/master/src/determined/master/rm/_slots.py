"""What this machine offers as slots: its NVIDIA GPUs, or else a number of CPU slots."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]+)\))?\s*$")


@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi -L`` lists it."""

    index: int
    name: str
    uuid: str


def parse_nvidia_smi_list(output: str) -> list[Gpu]:
    """The GPUs of ``nvidia-smi -L`` output (``GPU 0: NAME (UUID: GPU-...)`` lines; MIG lines skipped)."""
    gpus = []
    for line in output.splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            gpus.append(
                Gpu(int(match.group("index")), match.group("name"), match.group("uuid") or "")
            )
    return gpus


def discover_gpus(visible_devices: str | None = None) -> list[Gpu]:
    """This machine's GPUs, empty when ``nvidia-smi`` is missing or fails.

    Args:
        visible_devices: a ``CUDA_VISIBLE_DEVICES`` value (indices or UUIDs) restricting the GPUs
            offered; defaults to the master's own ``CUDA_VISIBLE_DEVICES`` (unset: all).
    """
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return []
    try:
        completed = subprocess.run(
            [executable, "-L"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if completed.returncode != 0:
        return []
    gpus = parse_nvidia_smi_list(completed.stdout)
    if visible_devices is None:
        visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible_devices is None:
        return gpus
    wanted = [item.strip() for item in visible_devices.split(",") if item.strip()]
    return [gpu for gpu in gpus if str(gpu.index) in wanted or gpu.uuid in wanted]


def cpu_slot_count() -> int:
    """The default number of CPU slots: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
