"""The real-peer fixtures in CI: skipped (with the reason) only without Go; with Go, a peer that cannot
be built fails the tests that need it, quoting go. Run in a child pytest with PATH and the cache set."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.fixtures import real_peers_group

ROOT = Path(__file__).resolve().parents[3]
TEST = "tests/testing/peers/test_controlplane.py::test_kube_apiserver_reports_its_release_version"


def child_pytest(path: str, cache: Path, *args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "MKPOLICY_PEERS_CACHE": str(cache), **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-rsE",
                           *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def path_without_go() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "go").exists())


def test_without_go_the_real_peer_tests_skip_saying_why(tmp_path: Path) -> None:
    proc = child_pytest(path_without_go(), tmp_path / "cache", TEST)
    assert proc.returncode == 0, proc.stdout
    assert "1 skipped" in proc.stdout
    assert "no Go toolchain ('go' is not on PATH)" in proc.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("xdist", [[], ["-n", "2", "--dist", "loadgroup"]], ids=["n0", "n2"])
def test_with_go_a_failed_build_fails_the_tests_quoting_go(tmp_path: Path, xdist: list[str]) -> None:
    """A ``go`` that cannot build (here: one that fails as a broken toolchain or proxy would)."""
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain ('go' is not on PATH)")
    fake = tmp_path / "bin" / "go"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'go: go.etcd.io/etcd/server/v3@v3.6.16: reading proxy: 403 Forbidden' >&2\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = child_pytest(f"{fake.parent}{os.pathsep}{path_without_go()}", tmp_path / "cache", *xdist, TEST)
    assert proc.returncode == 1, proc.stdout
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout
    assert "go build of etcd-v3.6.16 failed (exit 1)" in proc.stdout
    assert "403 Forbidden" in proc.stdout


@pytest.mark.parametrize(
    ("callspec_id", "group"),
    [
        ("kueue-v0.19.2", "real-peers-kueue-v0.19.2"),
        ("step-3-kueue-v0.17.1", "real-peers-kueue-v0.17.1"),
        ("patch-add", "real-peers"),
        (None, "real-peers"),
    ],
)
def test_real_peer_tests_are_grouped_by_kueue_version(callspec_id: str | None, group: str) -> None:
    """Each Kueue version's tests share one xdist worker (and its MultiKueue), the rest another."""
    item = SimpleNamespace(callspec=SimpleNamespace(id=callspec_id)) if callspec_id is not None else SimpleNamespace()
    assert real_peers_group(cast(pytest.Item, item)) == group


def plugin_project(tmp_path: Path, tests: str, go: str) -> tuple[Path, str]:
    """A pytest project using the real-peer plugin with ``tests`` in ``test_it.py``, and a PATH
    whose ``go`` is the script ``go``."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    real_peers: real peers\n")
    (project / "conftest.py").write_text('pytest_plugins = ["mkpolicy.testing.peers.fixtures"]\n')
    (project / "test_it.py").write_text(tests)
    fake = tmp_path / "bin" / "go"
    fake.parent.mkdir()
    fake.write_text(go)
    fake.chmod(0o755)
    return project, f"{fake.parent}{os.pathsep}{path_without_go()}"


OVERLAP_TESTS = """\
import os
from pathlib import Path

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.fixtures import require_peers

LOG = Path(os.environ["OVERLAP_LOG"])


@pytest.mark.real_peers
@pytest.mark.timeout(2)  # shorter than the build: waiting for it must not count
def test_peers_are_there():
    require_peers()
    assert all(build.binary_path(peer).is_file() for peer in build.all_peers())
    with LOG.open("a") as log:
        log.write("peer test\\n")


@pytest.mark.real_peers
@pytest.mark.timeout(2)
@pytest.mark.parametrize("kueue", ["v0.19.2"], ids=["kueue-v0.19.2"])
def test_a_kueue_version_needs_only_its_kueue(kueue):
    require_peers()
    assert build.binary_path(build.kueue(kueue)).is_file()
    with LOG.open("a") as log:
        log.write("kueue-v0.19.2 test\\n")


@pytest.mark.parametrize("n", range(4))
def test_plain(n):
    with LOG.open("a") as log:
        log.write("plain test\\n")
"""

#: A ``go`` whose builds finish only once a test has run (so a build that held the tests back
#: would fail after a minute), and take a second each; Kueue v0.17.1's only once the Kueue
#: v0.19.2 test has run (which needs no other Kueue).
SLOW_GO = """\
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done
awaited="plain test"
case "$out" in */kueue-v0.17.1/*) awaited="kueue-v0.19.2 test";; esac
i=0
until grep -q "$awaited" "$OVERLAP_LOG" 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 600 ] && { echo "no '$awaited' during the build"; exit 1; }; sleep 0.1
done
sleep 1
echo "built $(basename "$(dirname "$out")")" >> "$OVERLAP_LOG"
touch "$out"
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("xdist", [[], ["-n", "2", "--dist", "loadgroup"]], ids=["n0", "n2"])
def test_the_other_tests_run_during_the_build_and_the_real_peer_tests_after_it(
    tmp_path: Path, xdist: list[str]
) -> None:
    """The build starts in the background; the real-peer tests (first in their file) run last and
    wait for the peers they need outside their 2 s timeout (a Kueue version's test during the next
    Kueue's build); the build's progress is on the terminal (with xdist too: the controller builds)."""
    project, path = plugin_project(tmp_path, OVERLAP_TESTS, SLOW_GO)
    log = tmp_path / "log.txt"
    proc = child_pytest(path, tmp_path / "cache", *xdist, cwd=project, OVERLAP_LOG=str(log))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 passed" in proc.stdout
    assert "[peers] building etcd-v3.6.16: go build go.etcd.io/etcd/server/v3" in proc.stdout
    assert "[peers] built 4 peer(s) in " in proc.stdout
    lines = log.read_text().splitlines()
    assert lines.count("plain test") == 4
    assert [line for line in lines if line.startswith("built ")] == [f"built {peer.key}" for peer in build.all_peers()]
    assert lines.index("built kueue-v0.19.2") < lines.index("kueue-v0.19.2 test") < lines.index("built kueue-v0.17.1")
    assert lines[-1] == "peer test"


def test_real_peer_groups_are_dispatched_last() -> None:
    """xdist's loadgroup sends the largest groups first; the real-peer groups (as the workers
    published them) go after every other test, each to one worker, in build order."""
    from mkpolicy.testing.peers.schedule import GROUPS, RealPeersLastScheduling

    ids = [f"tests/test_x.py::test_{n}" for n in range(6)]
    v19 = [f"tests/peers/test_p.py::test_{n}[kueue-v0.19.2]" for n in range(5)]
    v17 = [f"tests/peers/test_p.py::test_{n}[kueue-v0.17.1]" for n in range(7)]
    other = [f"tests/peers/test_q.py::test_{n}" for n in range(9)]
    ids[1:1] = v19 + v17
    ids += other
    sent: dict[str, list[str]] = {"gw0": [], "gw1": []}
    dispatched: list[str] = []

    class Node:
        def __init__(self, name: str) -> None:
            self.name, self.shutting_down, self.gateway = name, False, SimpleNamespace(id=name)

        def send_runtest_some(self, indexes: list[int]) -> None:
            sent[self.name] += [ids[i] for i in indexes]
            dispatched.extend(ids[i] for i in indexes)

        def shutdown(self) -> None:
            self.shutting_down = True

    config = SimpleNamespace(
        option=SimpleNamespace(loadscopereorder=True), getvalue={"tx": ["2*popen"]}.get, stash=pytest.Stash()
    )
    config.stash[GROUPS] = (
        {t: "real-peers-kueue-v0.19.2" for t in v19}
        | {t: "real-peers-kueue-v0.17.1" for t in v17}
        | {t: "real-peers" for t in other}
    )
    scheduler = RealPeersLastScheduling(config)
    nodes = [Node("gw0"), Node("gw1")]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, ids)
    scheduler.schedule()
    # each worker completes what it was sent, in turn, until nothing is left
    done = {"gw0": 0, "gw1": 0}
    while any(done[n.name] < len(sent[n.name]) for n in nodes):
        for node in nodes:
            if done[node.name] < len(sent[node.name]):
                scheduler.mark_test_complete(node, ids.index(sent[node.name][done[node.name]]))
                done[node.name] += 1
    assert sorted(sent["gw0"] + sent["gw1"]) == sorted(ids)
    # the groups in build order (whatever their size), after every other test
    assert [dispatched.index(group[0]) for group in (v19, v17, other)] == sorted(
        dispatched.index(group[0]) for group in (v19, v17, other)
    )
    plain = [t for t in ids if t.startswith("tests/test_x.py")]
    assert min(dispatched.index(t) for t in v19 + v17 + other) > max(dispatched.index(t) for t in plain)
    for group in (v19, v17, other):  # a group in one worker, in order, after that worker's other tests
        [tests] = [tests for tests in sent.values() if group[0] in tests]
        assert tests[tests.index(group[0]) :][: len(group)] == group
    for tests in sent.values():
        at = [i for i, t in enumerate(tests) if t in plain]
        assert at == list(range(len(at)))


@pytest.mark.timeout(300)
def test_a_build_no_test_waited_for_is_stopped_with_the_session(tmp_path: Path) -> None:
    """``-x`` ends the run at the first failure, before the real-peer test: go is killed, not orphaned."""
    pidfile = tmp_path / "go.pid"
    tests = "import pytest\n\n\n@pytest.mark.real_peers\ndef test_peer():\n    pass\n\n\ndef test_fails():\n    assert False\n"
    project, path = plugin_project(tmp_path, tests, f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 600\n")
    proc = child_pytest(path, tmp_path / "cache", "-x", cwd=project)
    assert proc.returncode == 1, proc.stdout
    assert "1 failed" in proc.stdout and "passed" not in proc.stdout
    assert "[peers] build stopped: no test waited for it" in proc.stdout
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
