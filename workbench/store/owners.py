"""Whose run it is: the process that created a 'running' run, and whether it still lives, so a
run left by a dead process (``kill -9``, a crash) reads failed ("interrupted")."""

from __future__ import annotations

import os
from typing import Any


def hostname() -> str:
    import socket

    return socket.gethostname()


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), None where unknown:
    a PID that is reused by a later process has a later start."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 of stat(5); the two before ")" are split off
    except (OSError, IndexError, ValueError):
        return None


def owner_alive(machine: dict[str, Any]) -> bool:
    """Is the process that created a 'running' run still alive (on this host)? A live process
    with the same PID but another start time is not it: the PID was reused."""
    pid = machine.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if machine.get("pid_host") != hostname():
        return True  # another host's process: we cannot tell, so leave its run alone
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        pass
    started = machine.get("pid_started")
    if isinstance(started, int):
        return process_start(pid) in (started, None)
    return True
