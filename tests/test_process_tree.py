"""tests/process_tree.py: a clean-up kills only processes that are still the children it recorded."""

from __future__ import annotations

import os
import select
import subprocess
import sys

from process_tree import alive, kill_if_still_children, process_parents


def _exited(pid_fd: int) -> bool:
    """Whether the process of ``pid_fd`` has ended (a pidfd turns readable then), waiting 30 s."""
    return bool(select.select([pid_fd], [], [], 30)[0])


def _sleeper(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", *args], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
    )


def test_a_recorded_child_is_killed() -> None:
    child = _sleeper("import sys; sys.stdin.read()")
    try:
        assert kill_if_still_children([child.pid], process_parents()) == [child.pid]
        assert child.wait(timeout=30) == -9
    finally:
        child.kill()
        child.wait()


def test_a_pid_whose_parent_differs_from_the_record_is_left_alone() -> None:
    """What a reused pid looks like: the number is there, its parent is not the recorded one."""
    child = _sleeper("import sys; sys.stdin.read()")
    try:
        assert process_parents()[child.pid] == os.getpid()
        assert kill_if_still_children([child.pid], {child.pid: 1}) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_process_gone_since_the_record_is_skipped() -> None:
    child = _sleeper("pass")
    parents = process_parents()
    child.wait(timeout=30)  # reaped: its pid is free
    assert kill_if_still_children([child.pid], parents) == []


def test_a_grandchild_is_killed_with_its_parent() -> None:
    """Both are pinned before either is signalled, so the grandchild, orphaned as its parent dies,
    still matches the parent recorded for it."""
    script = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(p.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = _sleeper(script)
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        parents = process_parents()
        assert parents[grandchild] == child.pid
        watch = os.pidfd_open(grandchild)
        try:
            killed = kill_if_still_children([child.pid, grandchild], parents)
            assert sorted(killed) == sorted([child.pid, grandchild])
            assert child.wait(timeout=30) == -9
            assert _exited(watch)
        finally:
            os.close(watch)
    finally:
        child.kill()
        child.wait()


def test_alive_until_the_process_ends_reaped_or_not() -> None:
    child = _sleeper("import sys; sys.stdin.read()")
    try:
        assert alive(child.pid)
        watch = os.pidfd_open(child.pid)
        try:
            assert child.stdin is not None
            child.stdin.close()  # it exits; not reaped yet, so a zombie
            assert _exited(watch)
            assert not alive(child.pid)
        finally:
            os.close(watch)
    finally:
        child.kill()
        child.wait()
    assert not alive(child.pid)
