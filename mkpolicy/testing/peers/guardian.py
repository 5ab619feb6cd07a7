"""The peers' guardian: stops them when the process that started them dies, however it dies.

A SIGKILL (a CI timeout, the OOM killer, ``kill -9``) runs no ``atexit`` handler, and the
peers run in sessions of their own, so without this they would go on holding ports and
folders. Linux's ``PR_SET_PDEATHSIG`` is not used: Python can set it only through
``preexec_fn``, which is unsafe in a process with threads, and it fires when the thread
that forked exits, not the process.

The parent starts this script once (``python -I guardian.py``, in a session of its own, so a
Ctrl-C reaches only the parent) with a pipe on its stdin, and writes one line per change:
``+PID`` for a child started (a peer is a session leader: its whole process group is
stopped), ``-PID`` for one the parent stopped itself. The pipe's write end is the parent's
alone (Python's descriptors are not inherited across exec), so end of file means the parent
is gone, or stopped everything and closed it. Then every child still listed gets SIGTERM
and, after a grace period, SIGKILL. A pid is signalled only while it is the same process:
its start time (``/proc/PID/stat``) is read when it is listed and again before each signal,
so a pid the kernel gave to another process since is left alone.

Standard library only: it runs by path, without importing mkpolicy.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable

#: Seconds between SIGTERM and SIGKILL (``Process.stop``'s default too).
GRACE = 10.0


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/PID/stat``); None
    where it cannot be read (the process is gone, or there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')': split after the last ')'
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def same(pid: int, started: str | None) -> bool:
    """``pid`` is still the process listed as started at ``started`` (unknown start times are trusted)."""
    return started is None or start_time(pid) == started


def signal_listed(pid: int, started: str | None, signum: int) -> bool:
    """Send ``signum`` to the listed process ``pid`` (to its whole group when it leads one, as a peer in a
    session of its own does) while it is still that process; False when there is nothing left to signal."""
    if not same(pid, started):
        return False
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):  # gone, or (a reused pid) not ours
        return False
    return True


def stop_all(listed: dict[int, str | None], grace: float = GRACE) -> None:
    """SIGTERM each listed process, SIGKILL the ones still there after ``grace`` seconds."""
    living = {pid: started for pid, started in listed.items() if signal_listed(pid, started, signal.SIGTERM)}
    deadline = time.monotonic() + grace
    while living and time.monotonic() < deadline:
        time.sleep(0.1)
        living = {pid: started for pid, started in living.items() if signal_listed(pid, started, 0)}
    for pid, started in living.items():
        signal_listed(pid, started, signal.SIGKILL)


def watch(lines: Iterable[str], grace: float = GRACE) -> dict[int, str | None]:
    """Follow the parent's ``+PID``/``-PID`` lines until end of file, then stop what is still listed;
    returns what was listed at the end. Lines of another shape are ignored (the parent writes them)."""
    listed: dict[int, str | None] = {}
    for line in lines:
        op, number = line[:1], line[1:].strip()
        if not number.isdigit():
            continue
        pid = int(number)
        if op == "+":
            listed[pid] = start_time(pid)
        elif op == "-":
            listed.pop(pid, None)
    stop_all(listed, grace)
    return listed


def main() -> None:
    """Run as the guardian: stdin is the parent's pipe."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # a closed terminal or a Ctrl-C is the parent's to handle
    watch(sys.stdin)


if __name__ == "__main__":
    main()
