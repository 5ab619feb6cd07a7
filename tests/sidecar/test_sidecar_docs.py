"""docs/install.md stays true to the code: options, metrics, files and config fields it names exist."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from mkpolicy.cli.main import build_parser
from mkpolicy.sidecar.config import SidecarConfig, Worker, model_of
from mkpolicy.sidecar.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "install.md").read_text()


def test_cli_options_exist() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    help_text = "".join(parser.format_help() for parser in commands.values())
    for option in sorted(set(re.findall(r"(--[a-z][a-z-]+)", DOC))):
        if option in ("--server-side", "--from-file", "--dry-run", "--type", "--feature-gates", "--force-conflicts",
                      "--field-manager", "--kustomize", "--strict"):  # fmt: skip
            continue  # kubectl's, Kueue's and argo's flags
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


#: Config paths the docs name (``kubeconfig.*`` is a worker's), with an optional ``: value``.
CONFIG_PATH = r"`((?:listen|ops|manager|state|shutdown|reload|logging|limits|kubeconfig)\.[a-zA-Z_.]+)(?::[^`]*)?`"


def test_config_fields_exist() -> None:
    paths = set(re.findall(CONFIG_PATH, DOC))
    assert {"kubeconfig.file", "kubeconfig.secret", "manager.reads", "listen.basePort"} <= paths
    for dotted in sorted(paths):
        model: type[BaseModel] | None = Worker if dotted.startswith("kubeconfig.") else SidecarConfig
        for part in dotted.split("."):
            assert model is not None, f"{dotted}: {part} is under a field that has no fields"
            fields = {info.alias or name: info for name, info in model.model_fields.items()}
            assert part in fields, f"{dotted}: {model.__name__} has no field {part}"
            model = model_of(fields[part].annotation)


def test_every_limit_is_documented() -> None:
    from mkpolicy.sidecar.config import Limits

    documented = set(re.findall(r"\| `limits\.([a-zA-Z]+)` \| ([0-9.]+|unset) \|", DOC))
    defaults = {
        (info.alias or name, "unset" if info.default is None else str(info.default))
        for name, info in Limits.model_fields.items()
    }
    assert documented == {(alias, value.removesuffix(".0")) for alias, value in defaults}
