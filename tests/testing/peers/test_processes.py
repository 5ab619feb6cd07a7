"""The local control plane's ports: picked free, and outside the kernel's ephemeral range (a port of
that range can become an outgoing connection's local port before the peer binds it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mkpolicy.testing.peers import processes
from mkpolicy.testing.peers.processes import free_port


def test_ports_are_free_and_below_the_ephemeral_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "_EPHEMERAL_RANGE", str(ranges))
    for _ in range(20):
        port = free_port()
        assert processes._LOWEST_PORT <= port < 32768
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # still free


@pytest.mark.parametrize("content", ["", "not numbers", "10500 60999"], ids=["empty", "garbled", "no-room-below"])
def test_without_a_usable_range_the_kernel_picks(content: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text(content)
    monkeypatch.setattr(processes, "_EPHEMERAL_RANGE", str(ranges))
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert port > 0
