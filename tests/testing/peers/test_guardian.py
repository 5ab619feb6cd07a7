"""The peers' guardian: a parent killed outright (SIGKILL runs no ``atexit``) leaves no peer running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mkpolicy.testing.peers import guardian

# Bounds are generous (the machines are shared): each thing awaited happens within a second when quiet.
GONE_WITHIN = 60.0


def sleeper(*, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    """A process in a session of its own, as peers are started; optionally deaf to SIGTERM."""
    code = "import signal, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(600)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # its handlers are set
    return proc


def gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped by whoever adopted it counts as gone)."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.1)
    return False


def test_the_start_time_is_read_from_proc() -> None:
    started = guardian.start_time(os.getpid())
    assert started is not None and started.isdigit()
    assert guardian.start_time(2**22 + 1) is None  # above the kernel's largest pid: never a process


def test_listed_groups_are_stopped_at_end_of_file_and_unlisted_ones_are_not() -> None:
    listed, unlisted = sleeper(), sleeper()
    try:
        left = guardian.watch([f"+{listed.pid}\n", f"+{unlisted.pid}\n", f"-{unlisted.pid}\n", "garbage\n"])
        assert list(left) == [listed.pid]
        assert listed.wait(GONE_WITHIN) == -signal.SIGTERM
        assert unlisted.poll() is None
    finally:
        for proc in (listed, unlisted):
            proc.kill()
            proc.wait()


def test_a_peer_deaf_to_sigterm_is_killed_after_the_grace_period() -> None:
    deaf = sleeper(ignore_term=True)
    try:
        guardian.watch([f"+{deaf.pid}\n"], grace=0.5)
        assert deaf.wait(GONE_WITHIN) == -signal.SIGKILL
    finally:
        deaf.kill()
        deaf.wait()


def test_a_pid_that_is_another_process_now_is_left_alone() -> None:
    """Listed with another start time: the kernel gave the pid to a new process since."""
    other = sleeper()
    try:
        guardian.stop_all({other.pid: "1"}, grace=0.5)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from mkpolicy.testing.peers import processes
    peer = processes.Process("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], Path(sys.argv[1]))
    peer.start()
    stopped = processes.Process("stopped", [sys.executable, "-c", "import time; time.sleep(600)"], Path(sys.argv[1]))
    stopped.start()
    stopped.stop()
    plain = processes.guarded(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
    print(peer.pid, plain.pid, processes._guardian.pid, flush=True)
    """
)


@pytest.mark.timeout(300)
def test_a_parent_killed_outright_leaves_no_child_running(tmp_path: Path) -> None:
    code = PARENT + "time.sleep(600)\n"
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "peer.log")], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    peer, plain, guard = (int(word) for word in parent.stdout.readline().split())
    try:
        assert not gone(peer) and not gone(plain) and not gone(guard)
        parent.kill()  # no atexit, no finally: only the guardian is left to act
        parent.wait()
        assert wait_gone(peer), "the peer outlived its parent"
        assert wait_gone(plain), "the guarded child (in the parent's process group) outlived its parent"
        assert wait_gone(guard), "the guardian did not exit after stopping the peer"
    finally:
        for pid in (peer, plain, guard):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(300)
def test_an_orderly_exit_stops_the_guardian_too(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PARENT, str(tmp_path / "peer.log")], capture_output=True, text=True,
                          timeout=GONE_WITHIN)  # fmt: skip
    assert done.returncode == 0, done.stderr
    peer, plain, guard = (int(word) for word in done.stdout.split())
    assert wait_gone(peer) and wait_gone(guard)
    assert wait_gone(plain)  # still listed when the pipe ended: the guardian stopped it
