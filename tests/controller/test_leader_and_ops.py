"""Leader election (one instance reconciles; a standby takes over), the ops endpoints and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from controller_harness import POLICY, ROOT, Kueue, batchrun, controller, eventually, server

from mkpolicy.cli.main import main


def test_only_the_leader_reconciles_and_a_standby_takes_over() -> None:
    with server() as srv:
        kueue = Kueue(srv)

        async def scenario() -> None:
            async with controller(srv, identity="first") as first:
                await asyncio.wait_for(first.elector.leading.wait(), 10)  # type: ignore[union-attr]
                async with controller(srv, identity="second") as second:
                    srv.create(batchrun("a"))
                    await eventually(kueue.workload, what="a Workload")
                    assert second.elector is not None and not second.elector.leading.is_set()
                    assert not second.recorder.recorded  # the standby wrote nothing
                    lease = srv.get("coordination.k8s.io/v1", "Lease", "mkpolicy-controller", "kueue-system")
                    assert lease["spec"]["holderIdentity"] == "first"
                    await first.stop()  # releases the Lease
                    await asyncio.wait_for(second.elector.leading.wait(), 10)
                    srv.create(batchrun("b"))
                    await eventually(lambda: len(kueue.workloads()) == 2, what="the second Workload")
                    assert [r for _, r, _ in second.recorder.recorded] == ["CreatedWorkload"]

        asyncio.run(scenario())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_health_readiness_and_metrics() -> None:
    with server() as srv:
        kueue = Kueue(srv)

        async def scenario() -> None:
            async with controller(srv, ops_port=0) as ctl:
                base = f"http://127.0.0.1:{ctl.ops_port}"
                srv.create(batchrun())
                await eventually(kueue.workload, what="the Workload")
                async with aiohttp.ClientSession() as http:
                    async with http.get(base + "/healthz") as resp:
                        assert resp.status == 200
                    async with http.get(base + "/readyz?verbose") as resp:
                        text = await resp.text()
                        assert resp.status == 200 and "ok cache batchrun" in text and "ok lease" in text
                    async with http.get(base + "/metrics") as resp:
                        text = await resp.text()
                assert 'mkpolicy_controller_reconciles_total{outcome="ok",policy="batchrun"}' in text
                assert "mkpolicy_controller_leader 1.0" in text

        asyncio.run(scenario())


def test_cli_refuses_policies_without_integration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "--policies", str(ROOT / "policies/kueue/job.yaml")]) == 1
    assert "no policy has spec.integration" in capsys.readouterr().err


def test_cli_refuses_a_bad_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "k").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    assert main(["controller", "--policies", str(POLICY), "--kubeconfig", str(tmp_path / "k")]) == 2
    assert capsys.readouterr().err


def test_cli_runs_until_sigterm_with_json_logs(tmp_path: Path) -> None:
    with server() as srv:
        kubeconfig = srv.write_kubeconfig(tmp_path / "kubeconfig")
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mkpolicy", "controller", "--policies", str(POLICY), "--kubeconfig",
             str(kubeconfig), "--ops-address", "127.0.0.1", "--ops-port", str(port)],
            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            srv.create(batchrun())
            deadline = time.monotonic() + 60
            while not Kueue(srv).workloads():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "no Workload"
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        lines = [json.loads(line) for line in err.splitlines() if line.strip()]
        assert any(line["msg"] == "became the leader" for line in lines)
        assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
