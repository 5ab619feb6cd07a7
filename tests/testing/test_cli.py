"""``mkpolicy dev apiserver``: serves until interrupted, writes a kubeconfig, rejects bad input."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import kubernetes
import pytest
import yaml

from mkpolicy.cli.main import main

from .conftest import simple_crd


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkpolicy", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_serves_until_interrupted(tmp_path: Path) -> None:
    crd_file = tmp_path / "widgets.yaml"
    crd_file.write_text(yaml.safe_dump(simple_crd()))
    kubeconfig = tmp_path / "out" / "kc.yaml"
    kubeconfig.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mkpolicy", "dev", "apiserver", "--kubeconfig-out", str(kubeconfig),
         "--crd", str(crd_file), "--bundled", "--namespace", "team", "--name", "dev1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no kubeconfig after 20 s"
            time.sleep(0.05)
        client = kubernetes.config.new_client_from_config(str(kubeconfig))
        namespaces = [n.metadata.name for n in kubernetes.client.CoreV1Api(client).list_namespace().items]
        assert "team" in namespaces
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        kubernetes.client.CustomObjectsApi(client).create_namespaced_custom_object(
            "example.com", "v1", "team", "widgets", body
        )
        assert yaml.safe_load(kubeconfig.read_text())["current-context"] == "dev1"
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "serving https://127.0.0.1:" in out and "Workload.kueue.x-k8s.io" in out and "Widget.example.com" in out
    assert out.rstrip().endswith("stopped")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--crd", "/nonexistent.yaml"], "cannot read CRD file"),
        (["--port", "70000"], "--port must be between 0 and 65535"),
        (["--crd", "{tmp}/bad.yaml"], "malformed YAML"),
    ],
    ids=["missing-crd", "bad-port", "not-yaml"],
)
def test_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "bad.yaml").write_text("key: [unclosed\n")
    args = [a.format(tmp=tmp_path) for a in args]
    proc = run_cli("dev", "apiserver", "--kubeconfig-out", str(tmp_path / "kc"), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "kc").exists()


def test_non_crd_document_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "cm.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    proc = run_cli("dev", "apiserver", "--kubeconfig-out", str(tmp_path / "kc"), "--crd", str(bad))
    assert proc.returncode == 2
    assert "expected an apiextensions.k8s.io/v1 CustomResourceDefinition, found v1/ConfigMap" in proc.stderr


def test_port_in_use_exits_2(tmp_path: Path, apiserver_factory) -> None:
    busy = apiserver_factory("busy", bundled=False)
    proc = run_cli("dev", "apiserver", "--kubeconfig-out", str(tmp_path / "kc"), "--port", str(busy.port))
    assert proc.returncode == 2 and "cannot listen on 127.0.0.1:" in proc.stderr


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dev", "apiserver", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for needed in ("--kubeconfig-out", "--crd", "--bundled", "--port", "examples:", "kubectl", "exit codes"):
        assert needed in text
    assert main(["dev"]) == 2
    assert "apiserver" in capsys.readouterr().err
