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

from mkpolicy.testing.peers.fixtures import real_peers_group

ROOT = Path(__file__).resolve().parents[3]
TEST = "tests/testing/peers/test_controlplane.py::test_kube_apiserver_reports_its_release_version"


def child_pytest(path: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "MKPOLICY_PEERS_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-rsE",
                           TEST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def path_without_go() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "go").exists())


def test_without_go_the_real_peer_tests_skip_saying_why(tmp_path: Path) -> None:
    proc = child_pytest(path_without_go(), tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout
    assert "1 skipped" in proc.stdout
    assert "no Go toolchain ('go' is not on PATH)" in proc.stdout


@pytest.mark.timeout(300)
def test_with_go_a_failed_build_fails_the_tests_quoting_go(tmp_path: Path) -> None:
    """A ``go`` that cannot build (here: one that fails as a broken toolchain or proxy would)."""
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain ('go' is not on PATH)")
    fake = tmp_path / "bin" / "go"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'go: go.etcd.io/etcd/server/v3@v3.6.16: reading proxy: 403 Forbidden' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = child_pytest(f"{fake.parent}{os.pathsep}{path_without_go()}", tmp_path / "cache")
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
