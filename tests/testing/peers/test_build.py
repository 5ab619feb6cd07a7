"""The peer builder: go build into the version-keyed cache, once under a lock, go's output quoted on failure.

These build a tiny Go module of the test's own (a second or two with a warm Go cache), not the
real peers: the real ones are built (and their flags checked) by tests/peers.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.background import BackgroundBuild

pytestmark = pytest.mark.timeout(300)

MAIN = """\
package main

import "fmt"

var version = "unset"

func main() { fmt.Println("tiny", version) }
"""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if build.go_binary() is None:
        pytest.skip("no Go toolchain (go is not on PATH)")
    monkeypatch.setenv("MKPOLICY_PEERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOFLAGS", "-mod=mod")
    return tmp_path / "cache"


def tiny(tmp_path: Path, source: str = MAIN, version: str = "v1.2.3") -> build.Peer:
    module = tmp_path / "tiny"
    module.mkdir(exist_ok=True)
    (module / "go.mod").write_text("module example.test/tiny\n\ngo 1.26.0\n")
    (module / "main.go").write_text(source)
    # an absolute module path: Peer.module is joined onto the checkout's peers/ folder
    return build.Peer("tiny", version, str(module), ".", "tiny", ("-s", "-w", f"-X main.version={version}"))


def test_builds_into_the_cache_with_the_ldflags(tmp_path: Path, cache: Path) -> None:
    lines: list[str] = []
    paths = build.ensure([tiny(tmp_path)], log=lines.append)
    assert paths == {"tiny-v1.2.3": cache / "tiny-v1.2.3" / "tiny"}
    assert subprocess.run([paths["tiny-v1.2.3"]], capture_output=True, text=True).stdout == "tiny v1.2.3\n"
    assert lines[0].startswith("building tiny-v1.2.3: go build . in ")
    assert any(line.startswith("built tiny-v1.2.3 in ") for line in lines)
    # cached: nothing is built again
    lines.clear()
    assert build.ensure([tiny(tmp_path)], log=lines.append) == paths
    assert lines == []


def test_parallel_callers_build_once(tmp_path: Path) -> None:
    lines: list[str] = []
    peer = tiny(tmp_path)
    threads = [threading.Thread(target=build.ensure, args=([peer],), kwargs={"log": lines.append}) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(line.startswith("building ") for line in lines) == 1


def test_a_failed_build_quotes_go_and_leaves_nothing(tmp_path: Path, cache: Path) -> None:
    peer = tiny(tmp_path, MAIN.replace("fmt.Println", "fmt.Printn"))
    with pytest.raises(build.PeerBuildError) as info:
        build.ensure([peer], log=lambda _: None)
    message = info.value.message
    assert message.startswith("go build of tiny-v1.2.3 failed (exit 1) in ")
    assert "go's last lines:" in message and "Printn" in message
    assert not (cache / "tiny-v1.2.3").exists() or list((cache / "tiny-v1.2.3").iterdir()) == []


def test_a_missing_module_is_named(tmp_path: Path) -> None:
    peer = build.Peer("ghost", "v0", str(tmp_path / "nowhere"), ".", "ghost")
    with pytest.raises(build.PeerBuildError, match=r"no Go module at .*nowhere \(expected go.mod and go.sum\)"):
        build.ensure([peer], log=lambda _: None)


def test_the_checkout_has_a_module_per_peer() -> None:
    for peer in build.all_peers():
        assert (build.modules_dir() / peer.module / "go.mod").is_file(), peer
        assert (build.modules_dir() / peer.module / "go.sum").is_file(), peer
    assert build.known_kueue_versions() == list(build.KUEUE_VERSIONS)


def test_a_new_build_of_our_own_source_removes_the_old_one(tmp_path: Path, cache: Path) -> None:
    """Source-keyed builds (the Go proxy) pile up as the source is edited; releases are kept."""
    release = build.ensure([tiny(tmp_path)], log=lambda _: None)["tiny-v1.2.3"]
    old = build.ensure([tiny(tmp_path, version="src-aaaaaaaaaaaa")], log=lambda _: None)["tiny-src-aaaaaaaaaaaa"]
    lines: list[str] = []
    new = build.ensure([tiny(tmp_path, version="src-bbbbbbbbbbbb")], log=lines.append)["tiny-src-bbbbbbbbbbbb"]
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [
        "tiny-src-bbbbbbbbbbbb",
        "tiny-v1.2.3",
    ]
    assert new.is_file() and release.is_file() and not old.parent.exists()
    assert "removed tiny-src-aaaaaaaaaaaa: an earlier build of tiny's source" in lines


def test_kube_apiserver_gets_the_version_ldflags() -> None:
    flags = build.kube_apiserver("v1.36.3").ldflags
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    assert "-X k8s.io/client-go/pkg/version.gitVersion=v1.36.3" in flags


def test_the_go_proxy_is_keyed_by_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own Go source (peers/goproxy) has no release version: an edit of it is a new cache key."""
    checkout = build.modules_dir()
    peers = tmp_path / "peers"
    (peers / "goproxy").mkdir(parents=True)
    for name in ("go.mod", "main.go"):
        (peers / "goproxy" / name).write_bytes((checkout / "goproxy" / name).read_bytes())
    monkeypatch.setattr(build, "modules_dir", lambda: peers)
    before = build.goproxy()
    assert before.version.startswith("src-") and before.module == "goproxy"
    assert build.goproxy() == before
    (peers / "goproxy" / "main.go").write_text((peers / "goproxy" / "main.go").read_text() + "\n// edited\n")
    assert build.goproxy().key != before.key


@pytest.mark.parametrize(("user", "seen"), [({}, "400 3GiB"), ({"GOGC": "150"}, "150 3GiB")])
def test_the_compiler_runs_with_less_garbage_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: dict[str, str], seen: str
) -> None:
    # -toolexec runs every tool through the script: it records what the compiler's environment says.
    record = tmp_path / "gc.txt"
    script = tmp_path / "record.sh"
    script.write_text(f'#!/bin/sh\necho "$GOGC $GOMEMLIMIT" >> {record}\nexec "$@"\n')
    script.chmod(0o755)
    monkeypatch.delenv("GOGC", raising=False)
    monkeypatch.delenv("GOMEMLIMIT", raising=False)
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GOFLAGS", f"-mod=mod -toolexec={script}")
    build.ensure([tiny(tmp_path, version=f"v-gc-{len(user)}")], log=lambda _: None)
    assert set(record.read_text().splitlines()) == {seen}


#: For a fake ``go``: "build" by creating the file named after ``-o``.
WRITE_OUTPUT = 'while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done; touch "$out"'


def fake_go(tmp_path: Path, script: str) -> str:
    """A PATH whose ``go`` runs ``script`` (sh) instead of building (the real go's folder left out)."""
    fake = tmp_path / "fakebin" / "go"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    rest = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "go").exists()]
    return os.pathsep.join([str(fake.parent), *rest])


def test_stop_kills_the_build_and_leaves_nothing(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = tmp_path / "started"
    monkeypatch.setenv("PATH", (fake_go(tmp_path, f"echo compiling; touch {started}; exec sleep 600")))
    peer, stop = tiny(tmp_path), threading.Event()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            build.ensure([peer], log=lambda _: None, stop=stop)
        except build.PeerBuildError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    while not started.exists() and thread.is_alive():
        thread.join(0.05)
    stop.set()
    thread.join(60)
    assert not thread.is_alive()
    [error] = outcome
    assert isinstance(error, build.PeerBuildError)
    assert error.message.startswith("the build of tiny-v1.2.3 was stopped after ")
    assert list((cache / "tiny-v1.2.3").iterdir()) == []


def test_a_background_build_holds_the_lock_and_reports_its_outcome(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release"
    # builds (writes its -o file) once the test creates `release`
    monkeypatch.setenv("PATH", (fake_go(tmp_path, f"while [ ! -e {release} ]; do sleep 0.05; done; {WRITE_OUTPUT}")))
    peer = tiny(tmp_path)
    first = BackgroundBuild([peer], log=lambda _: None)
    first.start()
    assert first.wait_until_locked(60)
    second = BackgroundBuild([peer], log=lambda _: None)
    second.start()
    assert not second.wait_until_locked(0.3)  # the first one holds the lock
    release.touch()
    assert first.result() == second.result() == {"tiny-v1.2.3": cache / "tiny-v1.2.3" / "tiny"}
    assert not first.running and not second.running


def test_a_background_build_that_fails_raises_when_its_result_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", (fake_go(tmp_path, "echo 'go: reading proxy: 403 Forbidden'; exit 1")))
    background = BackgroundBuild([tiny(tmp_path)], log=lambda _: None)
    background.start()
    with pytest.raises(build.PeerBuildError, match="403 Forbidden"):
        background.result()


def test_stop_ends_a_wait_for_another_process_build(tmp_path: Path, cache: Path) -> None:
    """Stopping a build that waits on the cache's lock (another process builds) returns at once."""
    with build.build_lock():  # another holder: flock locks per open file, so this blocks the build
        background = BackgroundBuild([tiny(tmp_path)], log=lambda _: None)
        background.start()
        assert not background.wait_until_locked(0.3)
        background.stop()
        assert not background.running
        with pytest.raises(build.PeerBuildError, match="stopped waiting for another process's build"):
            background.result()
