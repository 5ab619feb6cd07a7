"""kubectl as a test client: a real Go client (client-go) against the loopback server or the sidecar.

kubectl shows what Kueue's transport does, because it is the same code: client-go's TLS
and bearer-token handling, HTTP/1.1 when the server offers no h2, aggregated discovery,
the JSON watch decoder, DELETE bodies. Tests skip when kubectl is not installed::

    kubectl = Kubectl.for_kubeconfig(path, tmp_path)      # None when kubectl is absent
    out = kubectl.run("get", "pipelineruns", "-A", "-o", "json")
    with kubectl.watch("get", "pipelineruns", "-w", "--output-watch-events", "-o", "json") as events:
        ...                                                 # next(events) -> one decoded event
    with kubectl.proxy() as base:                           # kubectl proxy: any header, client-go's transport
        urllib.request.urlopen(urllib.request.Request(base + "/api", headers={"Accept": ...}))

``run(..., verbose=True)`` passes ``-v=8``: the requests and response headers kubectl logs
are in the result's ``stderr`` (:func:`requests_logged` extracts them).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: A request line of kubectl -v=6 and above (client-go's round_trippers.go).
_REQUEST = re.compile(r"round_trippers\.go:\d+\] (GET|POST|PUT|PATCH|DELETE|HEAD) (https?://\S+)")
_HEADER = re.compile(r"round_trippers\.go:\d+\]\s{4,}([A-Za-z-]+): (.*)$")
_RESPONSE = re.compile(r"round_trippers\.go:\d+\] Response Status: (\d+)")
_BODY = re.compile(r'"Request Body" body=(".*")$')


@dataclass
class Logged:
    """One request kubectl logged at -v=8: its URL, request headers, status, response headers."""

    method: str
    url: str
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)


def requests_logged(stderr: str) -> list[Logged]:
    """The requests in kubectl's ``-v=8`` log."""
    out: list[Logged] = []
    in_response = False
    body = ""
    block: list[str] | None = None  # klog's multi-line value: body=< ... >
    for line in stderr.splitlines():
        if block is not None:
            if line.strip() == ">":
                body, block = "\n".join(block), None
            else:
                block.append(line.strip())
            continue
        if '"Request Body" body=<' in line:
            block = []
        elif m := _BODY.search(line):
            body = json.loads(m.group(1))  # logged (Go %q) before its request line
        elif m := _REQUEST.search(line):
            out.append(Logged(m.group(1), m.group(2), body))
            in_response, body = False, ""
        elif out and (m := _RESPONSE.search(line)):
            out[-1].status = int(m.group(1))
            in_response = True
        elif out and (m := _HEADER.search(line)):
            (out[-1].response_headers if in_response else out[-1].headers)[m.group(1)] = m.group(2).strip()
    return out


def kubectl_path() -> str | None:
    """The kubectl on ``PATH``, or None."""
    return shutil.which("kubectl")


class Kubectl:
    """kubectl bound to a kubeconfig, with a discovery cache of its own."""

    def __init__(self, binary: str, kubeconfig: Path, cache_dir: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.cache_dir = cache_dir

    @classmethod
    def for_kubeconfig(cls, kubeconfig: Path, tmp: Path) -> Kubectl | None:
        """kubectl for ``kubeconfig`` (None when kubectl is not installed)."""
        binary = kubectl_path()
        if binary is None:
            return None
        return cls(binary, kubeconfig, tmp / "kubectl-cache")

    def _argv(self, args: tuple[str, ...], verbose: bool) -> list[str]:
        base = [self.binary, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir)]
        return [*base, *(["-v=8"] if verbose else []), *args]

    def _env(self) -> dict[str, str]:
        # No proxy settings of the machine, no user kubeconfig: only what the test gives.
        env = {k: v for k, v in os.environ.items() if k.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "KUBECONFIG")}
        env["NO_PROXY"] = "127.0.0.1,localhost"
        return env

    def run(
        self, *args: str, input: str | None = None, verbose: bool = False, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; ``check``: fail with its output when it exits non-zero."""
        proc = subprocess.run(
            self._argv(args, verbose), input=input, capture_output=True, text=True, timeout=timeout, env=self._env()
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        """Run kubectl with ``-o json`` and decode its output."""
        return json.loads(self.run(*args, "-o", "json").stdout)

    @contextlib.contextmanager
    def watch(self, *args: str, timeout: float = 20) -> Iterator[Iterator[dict[str, Any]]]:
        """Run a watching kubectl (``-o json``): yields an iterator of decoded JSON documents."""
        proc = subprocess.Popen(
            self._argv(args, False), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self._env()
        )
        docs: queue.Queue[dict[str, Any] | None] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            decoder, buf = json.JSONDecoder(), ""
            for line in proc.stdout:
                buf += line
                while buf.strip():
                    try:
                        doc, end = decoder.raw_decode(buf.lstrip())
                    except ValueError:
                        break
                    buf = buf.lstrip()[end:]
                    docs.put(doc)
            docs.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def events() -> Iterator[dict[str, Any]]:
            while True:
                try:
                    doc = docs.get(timeout=timeout)
                except queue.Empty:
                    raise AssertionError(f"kubectl {' '.join(args)}: nothing within {timeout}s") from None
                if doc is None:
                    return
                yield doc

        try:
            yield events()
        finally:
            proc.terminate()
            proc.wait(10)
            reader.join(10)

    @contextlib.contextmanager
    def proxy(self) -> Iterator[str]:
        """``kubectl proxy`` on an ephemeral port: yields its base URL (plain HTTP on 127.0.0.1)."""
        proc = subprocess.Popen(
            self._argv(("proxy", "--port=0", "--address=127.0.0.1"), False),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self._env(),
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if m is None:
                raise AssertionError(f"kubectl proxy did not start: {line}{proc.stderr.read() if proc.stderr else ''}")
            yield f"http://127.0.0.1:{m.group(1)}"
        finally:
            proc.terminate()
            proc.wait(10)
