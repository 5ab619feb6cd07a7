"""What the serving ``mkpolicy dev`` tools share (``dev apiserver``, ``dev multikueue``): the CRD
files ``--crd`` names, a folder for kubeconfigs, and running until Ctrl-C, SIGTERM or SIGHUP."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path


def crd_files(paths: list[str]) -> list[str]:
    """The CRD files ``paths`` name: files as given, directories as their ``*.yaml``/``*.yml``."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith((".yaml", ".yml")))
            if not found:
                raise FileNotFoundError(f"{path}: a directory without *.yaml or *.yml files")
            files.extend(found)
        else:
            files.append(path)
    return files


def kubeconfig_dir_problem(given: str) -> str | None:
    """Why kubeconfigs cannot be written into the folder ``given`` (made if missing); None: they can."""
    try:
        Path(given).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--kubeconfig-dir {given}: cannot make the folder: {exc.strerror or exc}"
    if not os.access(given, os.W_OK | os.X_OK):
        return f"--kubeconfig-dir {given}: the folder is not writable"
    return None


@contextlib.contextmanager
def kubeconfig_dir(given: str | None) -> Iterator[Path]:
    """The folder ``given`` (made if missing), or a temporary one; on exit, the ``*.kubeconfig`` files
    written into it meanwhile are removed (they point at servers that are gone), the others are kept."""
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        before = set(path.glob("*.kubeconfig"))
        try:
            yield path
        finally:
            for file in set(path.glob("*.kubeconfig")) - before:
                file.unlink(missing_ok=True)
        return
    with tempfile.TemporaryDirectory(prefix="mkpolicy-multikueue-") as tmp:
        yield Path(tmp)


def kubeconfig_lines(files: Mapping[str, Path]) -> list[str]:
    """One ``NAME: PATH`` line per kubeconfig written, for the user to point kubectl at."""
    return [f"{name}: {path}" for name, path in files.items()]


def until_interrupted(lines: Iterable[str]) -> None:
    """Print ``lines`` (what runs, where its kubeconfigs are) and 'press Ctrl-C to stop', then block
    until SIGINT, SIGTERM or SIGHUP (the terminal closed: without it, the process would die without
    stopping anything). The caller stops what it started and prints 'stopped'."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    for line in lines:
        print(line, flush=True)
    print("press Ctrl-C to stop", flush=True)
    while not stop.wait(1):
        pass
