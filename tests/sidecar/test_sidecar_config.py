"""The SidecarConfig file: defaults, validation, located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkpolicy.sidecar.config import ConfigError, config_from_dict, load_config

MINIMAL = """\
apiVersion: mkpolicy.io/v1alpha1
kind: SidecarConfig
workers:
  - name: worker1
    kubeconfig: {file: /etc/w1.kubeconfig}
  - name: worker2
    kubeconfig:
      secret: {name: worker2-real}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sidecar.yaml"
    path.write_text(text)
    return str(path)


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL))
    assert cfg.origin == "multikueue"
    assert cfg.listen.address == "127.0.0.1"
    assert cfg.worker_ports() == [7443, 7444]
    assert cfg.manager.kubeconfig is None and cfg.manager.namespace == "kueue-system"
    assert cfg.manager.reads == "direct"  # live, as Kueue reads the manager's object
    assert cfg.workers[1].kubeconfig.secret is not None
    assert cfg.workers[1].kubeconfig.secret.key == "kubeconfig"
    assert cfg.ops.port == 7081
    # Safe in Kueue's pod: none of Kueue's ports, a grace below its terminationGracePeriodSeconds
    # (10), credentials kept across restarts where the manifests mount them.
    assert not {*cfg.worker_ports(), cfg.ops.port} & {8080, 8081, 8082, 8443, 9443}
    assert cfg.shutdown.grace_period_seconds < 10
    assert cfg.state.dir == "/var/run/mkpolicy"
    assert cfg.kueue.config_map == "kueue-manager-config" and cfg.kueue.version is None


def test_explicit_ports_and_ephemeral_ports() -> None:
    cfg = config_from_dict(
        {
            "listen": {"basePort": 0},
            "workers": [
                {"name": "a", "kubeconfig": {"file": "x"}},
                {"name": "b", "kubeconfig": {"file": "y"}, "port": 9600},
            ],
        }
    )
    assert cfg.worker_ports() == [0, 9600]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (MINIMAL + "bogus: 1\n", 9, "unknown field 'bogus'"),
        (MINIMAL.replace("name: worker2", "name: Worker_2"), 6, "expected a MultiKueueCluster name"),
        (MINIMAL.replace("{file: /etc/w1.kubeconfig}", "{}"), 5, "expected exactly one of 'file' or 'secret'"),
        (MINIMAL + "listen: {basePort: 70000}\n", 9, "expected a TCP port"),
        (MINIMAL + "kueue: {version: latest}\n", 9, "expected a Kueue version such as 0.19.2"),
        (MINIMAL + "manager: {reads: sometimes}\n", 9, "manager.reads"),
        (MINIMAL + "origin: 'bad origin'\n", 9, "expected a label value"),
        (MINIMAL.replace("worker2", "worker1"), 1, "duplicate worker name"),
    ],
    ids=["unknown-field", "bad-name", "no-source", "bad-port", "bad-version", "bad-enum", "bad-origin", "duplicate"],
)
def test_invalid_configs_are_located(tmp_path: Path, text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert any(message in p for p in info.value.problems), info.value.problems
    assert info.value.location.file is not None and info.value.location.file.endswith("sidecar.yaml")
    assert info.value.location.line == line


def test_port_collisions() -> None:
    with pytest.raises(ConfigError, match="both listen on port 7443"):
        config_from_dict(
            {
                "workers": [
                    {"name": "a", "kubeconfig": {"file": "x"}},
                    {"name": "b", "kubeconfig": {"file": "y"}, "port": 7443},
                ]
            }
        )
    with pytest.raises(ConfigError, match="ops port"):
        config_from_dict({"ops": {"port": 7443}, "workers": [{"name": "a", "kubeconfig": {"file": "x"}}]})


def test_no_workers_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least one worker"):
        config_from_dict({"workers": []})
    with pytest.raises(ConfigError, match="missing required field 'workers'"):
        load_config(write(tmp_path, "kind: SidecarConfig\n"))
    with pytest.raises(ConfigError):
        load_config(str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="expected one YAML document"):
        load_config(write(tmp_path, MINIMAL + "---\n" + MINIMAL))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            MINIMAL + "listen: {basPort: 7443}\n",
            "unknown field 'listen.basPort' (did you mean 'basePort'?); expected one of: address, basePort, hosts "
            "(docs/sidecar-config.md)",
        ),
        (
            MINIMAL.replace("{file: /etc/w1.kubeconfig}", "{file: /etc/w1.kubeconfig, secrt: x}"),
            "unknown field 'workers[0].kubeconfig.secrt' (did you mean 'secret'?); expected one of: file, secret",
        ),
        (MINIMAL + "reloads: {}\n", "expected one of: apiVersion, kind, origin, listen, ops, manager, kueue, workers"),
    ],
    ids=["listen", "nested-in-a-list", "top-level"],
)
def test_unknown_fields_list_the_valid_ones(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert any(message in p for p in info.value.problems), info.value.problems


def test_a_bind_error_names_the_field_that_holds_the_port() -> None:
    import asyncio
    import socket

    from aiohttp import web

    from mkpolicy.sidecar.config import bind_error

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    workers = [{"name": "a", "kubeconfig": {"file": "x"}, "port": port + 7}, {"name": "b", "kubeconfig": {"file": "y"}}]
    endpoint = config_from_dict({"listen": {"basePort": port - 1}, "ops": {"port": port + 9}, "workers": workers})
    ops = config_from_dict({"ops": {"address": "127.0.0.1", "port": port}, "workers": workers})

    async def bind_endpoint() -> OSError:
        try:
            await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", port)
        except OSError as exc:
            return exc
        raise AssertionError("the port is taken")

    async def bind_ops() -> OSError:
        runner = web.AppRunner(web.Application())
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", port).start()
        except OSError as exc:
            return exc
        finally:
            await runner.cleanup()
        raise AssertionError("the port is taken")

    try:
        assert bind_error(endpoint, asyncio.run(bind_endpoint())) == (
            f"listen.basePort + 1 (worker 'b'): cannot listen on 127.0.0.1:{port}: address already in use; "
            "choose a free port (or another address)"
        )
        assert bind_error(ops, asyncio.run(bind_ops())) == (
            f"ops.port (the /healthz, /readyz and /metrics endpoint): cannot listen on 127.0.0.1:{port}: "
            "address already in use; choose a free port (or another address)"
        )
        assert bind_error(ops, PermissionError(13, "Permission denied")) is None
    finally:
        taken.close()
