"""Build the real test peers (etcd, kube-apiserver, Kueue's manager) from the Go modules in ``peers/``.

Each peer is a ``go build`` of a ``tool`` of one module under the checkout's ``peers/``
directory (go.mod + go.sum only: the sources come from the Go module proxy). Binaries go
to a cache keyed by versions, ``${XDG_CACHE_HOME:-~/.cache}/mkpolicy/peers/<name>-<version>/<binary>``
(``MKPOLICY_PEERS_CACHE`` overrides the folder); what is there is never rebuilt. A file lock
in the cache folder makes parallel callers (pytest workers) build once: the others wait
and reuse the result.

Flags, as Kueue's Makefile and kube's release build use them: ``CGO_ENABLED=0``,
``-trimpath``, ``-ldflags "-s -w"``; kube-apiserver also gets the version ldflags (Kueue
parses the server's ``gitVersion`` as strict semver and exits on the default
``v0.0.0-master+$Format:%H$``: ``pkg/util/kubeversion/kubeversion.go``, component-base
``version/base.go``). The compiler runs with ``GOGC=400`` and ``GOMEMLIMIT=3GiB`` unless set
(:data:`COMPILER_GC`): less of a cold build's time in the compiler's garbage collector.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mkpolicy.errors import MkpolicyError

ETCD_VERSION = "v3.6.16"
KUBE_VERSION = "v1.36.3"
#: The Kueue versions the tests run, newest first (each has a module ``peers/kueue-<version>``).
KUEUE_VERSIONS = ("v0.19.2", "v0.17.1")
KUEUE_VERSION = KUEUE_VERSIONS[0]
BUILD_DATE = "2026-01-01T00:00:00Z"
#: The version of a peer built from the project's own source: this, then a hash of the source.
SOURCE_KEY = "src-"
#: The Go compiler's own garbage collector run four times less often, each compile's heap held
#: under a soft limit: a cold build costs about a fifth less CPU (docs/testing.md, measured),
#: and the binaries are the same (the environment the user sets wins).
COMPILER_GC = {"GOGC": "400", "GOMEMLIMIT": "3GiB"}


class PeerBuildError(MkpolicyError):
    """A peer cannot be built (no Go toolchain, no ``peers/`` modules, or ``go build`` failed)."""


@dataclass(frozen=True)
class Peer:
    """One binary to build: ``package`` (a ``tool`` of the module in ``peers/<module>``)."""

    name: str
    version: str
    module: str
    package: str
    binary: str
    ldflags: tuple[str, ...] = ("-s", "-w")

    @property
    def key(self) -> str:
        """The cache folder's name: ``<name>-<version>``."""
        return f"{self.name}-{self.version}"


def kube_ldflags(version: str) -> tuple[str, ...]:
    """kube-apiserver's version ldflags (what ``hack/lib/version.sh`` sets in a release build)."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = ["-s", "-w"]
    for pkg, fields in (
        ("k8s.io/component-base/version", {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
                                           "gitTreeState": "clean", "buildDate": BUILD_DATE}),
        ("k8s.io/client-go/pkg/version", {"gitVersion": version, "gitMajor": major, "gitMinor": minor}),
    ):  # fmt: skip
        flags += [f"-X {pkg}.{name}={value}" for name, value in fields.items()]
    return tuple(flags)


def etcd(version: str = ETCD_VERSION) -> Peer:
    """etcd: the root package of ``go.etcd.io/etcd/server/v3`` is its main."""
    return Peer("etcd", version, "etcd", "go.etcd.io/etcd/server/v3", "etcd")


def kube_apiserver(version: str = KUBE_VERSION) -> Peer:
    """kube-apiserver from ``k8s.io/kubernetes`` (staging modules replaced by their published versions)."""
    return Peer("kube-apiserver", version, "kube", "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver",
                kube_ldflags(version))  # fmt: skip


def kueue(version: str = KUEUE_VERSION) -> Peer:
    """Kueue's manager (``sigs.k8s.io/kueue/cmd/kueue``)."""
    return Peer("kueue", version, f"kueue-{version}", "sigs.k8s.io/kueue/cmd/kueue", "kueue")


def goproxy() -> Peer:
    """The bench's baseline reverse proxy (``peers/goproxy``: our own source, the standard library only),
    keyed by a hash of its source so that an edit rebuilds it."""
    digest = hashlib.sha256()
    for name in ("go.mod", "main.go"):
        digest.update((modules_dir() / "goproxy" / name).read_bytes())
    version = f"{SOURCE_KEY}{digest.hexdigest()[:12]}"
    return Peer("goproxy", version, "goproxy", "mkpolicy.test/peers/goproxy", "goproxy")


def all_peers(kueue_versions: Sequence[str] = KUEUE_VERSIONS) -> list[Peer]:
    """etcd, kube-apiserver and Kueue at each of ``kueue_versions``, in build order."""
    return [etcd(), kube_apiserver(), *(kueue(v) for v in kueue_versions)]


def normalize_kueue_version(version: str) -> str:
    """``0.19.2`` or ``v0.19.2`` -> ``v0.19.2``."""
    return version if version.startswith("v") else f"v{version}"


# -- where things are ----------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The binary cache: ``$MKPOLICY_PEERS_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/mkpolicy/peers``."""
    if os.environ.get("MKPOLICY_PEERS_CACHE"):
        return Path(os.environ["MKPOLICY_PEERS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mkpolicy" / "peers"


def modules_dir() -> Path:
    """The checkout's ``peers/`` folder (next to the ``mkpolicy`` package in a source checkout)."""
    path = Path(__file__).resolve().parents[3] / "peers"
    if not path.is_dir():
        raise PeerBuildError(
            f"the peers' Go modules are not at {path}: building the real peers needs a source checkout of "
            "mkpolicy (an installed wheel does not ship peers/)"
        )
    return path


def binary_path(peer: Peer) -> Path:
    """Where ``peer``'s binary is cached."""
    return cache_dir() / peer.key / peer.binary


def go_binary() -> str | None:
    """The ``go`` command on PATH, or None."""
    return shutil.which("go")


def known_kueue_versions() -> list[str]:
    """The Kueue versions with a module in ``peers/`` (``kueue-v*``), newest first."""

    def order(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.lstrip("v").split(".") if p.isdigit())

    found = [p.name.removeprefix("kueue-") for p in modules_dir().glob("kueue-v*") if (p / "go.mod").is_file()]
    return sorted(found, key=order, reverse=True)


# -- building --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def build_lock(stop: threading.Event | None = None) -> Iterator[None]:
    """An exclusive lock on the cache folder (flock: released when the process dies). Setting
    ``stop`` while another process holds it gives up waiting (:class:`PeerBuildError`)."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX if stop is None else fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop is not None and stop.wait(0.5):
                    raise PeerBuildError(f"stopped waiting for another process's build ({root / '.lock'})") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _format(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def build(
    peer: Peer,
    *,
    log: Callable[[str], None] = print,
    progress_every: float = 30.0,
    stop: threading.Event | None = None,
) -> Path:
    """``go build`` ``peer`` into the cache (written under a temporary name, then renamed); its path.

    ``go build -v`` names each package as it compiles it; every ``progress_every`` seconds
    the count so far is logged. On failure, :class:`PeerBuildError` quotes go's last lines.
    Setting ``stop`` kills go (what it compiled stays in the Go build cache) and raises
    :class:`PeerBuildError`.
    """
    go = go_binary()
    if go is None:
        raise PeerBuildError(f"cannot build {peer.key}: no Go toolchain ('go' is not on PATH)")
    module = modules_dir() / peer.module
    if not (module / "go.mod").is_file():
        raise PeerBuildError(f"cannot build {peer.key}: no Go module at {module} (expected go.mod and go.sum)")
    out = binary_path(peer)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    cmd = [go, "build", "-v", "-trimpath", "-ldflags", " ".join(peer.ldflags), "-o", str(partial), peer.package]
    env = {**COMPILER_GC, **os.environ, "CGO_ENABLED": "0"}
    log(f"building {peer.key}: go build {peer.package} in {module} (a cold build takes minutes)")
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=30)
    compiled = 0
    proc = subprocess.Popen(cmd, cwd=module, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def ticker() -> None:
        last = start
        while not done.wait(0.2):
            if stop is not None and stop.is_set():
                proc.kill()
                return
            if time.monotonic() - last >= progress_every:
                last = time.monotonic()
                log(f"  {peer.key}: {compiled} packages compiled, {_format(last - start)}")

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())
            compiled += 1
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        partial.unlink(missing_ok=True)
        raise
    finally:
        done.set()
    if code != 0:
        partial.unlink(missing_ok=True)
        if stop is not None and stop.is_set():
            raise PeerBuildError(f"the build of {peer.key} was stopped after {_format(time.monotonic() - start)}")
        quoted = "\n".join(f"  | {line}" for line in tail)
        raise PeerBuildError(f"go build of {peer.key} failed (exit {code}) in {module}; go's last lines:\n{quoted}")
    os.replace(partial, out)
    log(f"built {peer.key} in {_format(time.monotonic() - start)}: {out}")
    for old in superseded(peer):
        shutil.rmtree(old, ignore_errors=True)
        log(f"removed {old.name}: an earlier build of {peer.name}'s source")
    return out


def superseded(peer: Peer) -> list[Path]:
    """The cache folders of earlier builds of ``peer``'s own source (``<name>-src-*`` other than its key):
    a release is kept (another test may ask for it), an edited source's old build never is."""
    if not peer.version.startswith(SOURCE_KEY):
        return []
    return sorted(p for p in cache_dir().glob(f"{peer.name}-{SOURCE_KEY}*") if p.name != peer.key)


def ensure(
    peers: Sequence[Peer],
    *,
    log: Callable[[str], None] = print,
    locked: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Path]:
    """Each of ``peers``' binary path (keyed by :attr:`Peer.key`), building what the cache lacks.

    Under the cache lock: a second process waits for the first one's build and reuses it.
    ``locked`` is set once this call holds the lock or has nothing to build; ``stop`` ends a
    build (see :func:`build`).
    """
    paths = {p.key: binary_path(p) for p in peers}
    if all(path.is_file() for path in paths.values()):
        if locked is not None:
            locked.set()
        return paths
    with build_lock(stop):
        if locked is not None:
            locked.set()
        started = time.monotonic()
        built = 0
        for peer in peers:
            if not paths[peer.key].is_file():
                build(peer, log=log, stop=stop)
                built += 1
        if built:
            log(f"built {built} peer(s) in {_format(time.monotonic() - started)}; cache: {cache_dir()}")
    return paths


def lock_is_held() -> bool:
    """Whether a builder (this process or another) holds the cache's lock: a build is under way."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def await_built(peers: Sequence[Peer], *, log: Callable[[str], None] = print, poll: float = 1.0) -> dict[str, Path]:
    """``peers``' binaries as soon as they are in the cache: while a builder holds the lock, wait for
    the files (it may go on to build others); once nobody does, :func:`ensure` what is missing."""
    paths = {p.key: binary_path(p) for p in peers}
    while not all(path.is_file() for path in paths.values()):
        if not lock_is_held():
            return ensure(peers, log=log)
        time.sleep(poll)
    return paths


def kueue_module_dir(version: str = KUEUE_VERSION) -> Path:
    """Kueue's module in the Go module cache (``go mod download``: fetched when missing). Its
    ``config/components`` holds the CRDs and webhook manifests the peers install, read from
    there at run time (never copied into mkpolicy)."""
    go = go_binary()
    if go is None:
        raise PeerBuildError("cannot read Kueue's CRDs and webhooks: no Go toolchain ('go' is not on PATH)")
    module = modules_dir() / f"kueue-{version}"
    proc = subprocess.run([go, "mod", "download", "-json", f"sigs.k8s.io/kueue@{version}"], cwd=module,
                          capture_output=True, text=True, check=False)  # fmt: skip
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        detail = (info.get("Error") or proc.stderr or proc.stdout).strip()
        raise PeerBuildError(f"go mod download sigs.k8s.io/kueue@{version} failed: {detail}")
    path = Path(info["Dir"])
    if not (path / "config" / "components" / "crd" / "bases").is_dir():
        raise PeerBuildError(f"Kueue {version} has no CRDs under {path}/config/components/crd/bases")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``mkpolicy dev build-peers``: build what the cache lacks (see :func:`ensure`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="mkpolicy dev build-peers")
    parser.add_argument("--kueue-version", action="append", default=[])
    args = parser.parse_args(argv)
    versions = [normalize_kueue_version(v) for v in args.kueue_version] or list(KUEUE_VERSIONS)
    try:
        paths = ensure(all_peers(versions), log=lambda line: print(line, file=sys.stderr, flush=True))
    except PeerBuildError as exc:
        print(exc.report(), file=sys.stderr)
        return 1
    for key, path in paths.items():
        print(f"{key}: {path}")
    return 0
