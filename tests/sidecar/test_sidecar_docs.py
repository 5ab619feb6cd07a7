"""docs/install.md stays true to the code: options, metrics, files and config fields it names exist."""

from __future__ import annotations

import re
from pathlib import Path

from mkpolicy.cli.main import build_parser
from mkpolicy.sidecar.config import SidecarConfig
from mkpolicy.sidecar.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "install.md").read_text()


def test_cli_options_exist() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    help_text = "".join(parser.format_help() for parser in commands.values())
    for option in sorted(set(re.findall(r"(--[a-z][a-z-]+)", DOC))):
        if option in ("--server-side", "--from-file", "--dry-run", "--type", "--feature-gates"):
            continue  # kubectl's and Kueue's flags
        assert option in help_text, option


def test_metric_names_exist() -> None:
    registered = {m.name for m in Metrics().registry.collect()}
    for name in set(re.findall(r"`(mkpolicy_sidecar_[a-z_]+)", DOC)):
        base = name.removesuffix("_total")
        assert base in registered or name in registered, name
    for short in re.findall(r"`\.\.\.(_[a-z_]+)`", DOC):
        assert any(r.endswith(short.removesuffix("_total")) for r in registered), short


def test_files_exist() -> None:
    for path in set(re.findall(r"`((?:deploy|policies|examples|docs|mkpolicy)/[\w./-]+)`", DOC)):
        assert (ROOT / path).exists(), path


def test_config_fields_exist() -> None:
    fields = {info.alias or name for name, info in SidecarConfig.model_fields.items()}
    for dotted in re.findall(r"`((?:listen|ops|manager|state|shutdown|reload|kubeconfig)\.[a-zA-Z.]+)`", DOC):
        head = dotted.split(".")[0]
        assert head in fields or head == "kubeconfig", dotted
