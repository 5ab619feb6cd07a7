"""The SidecarConfig reference, generated from the pydantic models (never written by hand).

``docs/sidecar-config.md`` and ``schemas/sidecarconfig.schema.json`` are these outputs,
committed; a test fails when they drift from the models. Regenerate both with::

    mkpolicy schema --kind SidecarConfig > schemas/sidecarconfig.schema.json
    mkpolicy schema --kind SidecarConfig --format markdown > docs/sidecar-config.md
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from mkpolicy.sidecar.config import SidecarConfig, model_of

SCHEMA_ID = "https://mkpolicy.io/schemas/sidecarconfig.schema.json"

_EXAMPLE = """\
apiVersion: mkpolicy.io/v1alpha1
kind: SidecarConfig
workers:
  - name: worker1                  # the MultiKueueCluster's name
    kubeconfig:
      secret: {name: worker1-secret}
  - name: worker2
    kubeconfig:
      file: /etc/mkpolicy/workers/worker2.kubeconfig
"""


def sidecarconfig_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a SidecarConfig file."""
    out: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID}
    out.update(SidecarConfig.model_json_schema(by_alias=True, mode="validation"))
    out["description"] = "The configuration file of 'mkpolicy sidecar' (mkpolicy.io/v1alpha1, kind SidecarConfig)."
    return out


def render_schema() -> str:
    """The JSON Schema as the committed file holds it (stable key order, trailing newline)."""
    return json.dumps(sidecarconfig_schema(), indent=2, sort_keys=True) + "\n"


def render_markdown() -> str:
    """The reference page: every field of every section, with its type, default and meaning."""
    lines = [
        "# SidecarConfig reference",
        "",
        "<!-- Generated from mkpolicy/sidecar/config.py by "
        "'mkpolicy schema --kind SidecarConfig --format markdown'; do not edit. -->",
        "",
        "`mkpolicy sidecar --config FILE` reads one YAML document of kind `SidecarConfig`. Every",
        "field but `workers` has a default; unknown fields are errors, and every error names the",
        "file, line and column (an unknown field also lists the fields its section has). Editors",
        "validate the file with [`schemas/sidecarconfig.schema.json`](../schemas/sidecarconfig.schema.json):",
        "put `# yaml-language-server: $schema=<path to it>` at the top. `mkpolicy sidecar --check`",
        "validates a configuration without starting anything.",
        "",
        "A minimal configuration:",
        "",
        "```yaml",
        _EXAMPLE.rstrip("\n"),
        "```",
        "",
    ]
    sections: list[tuple[str, type[BaseModel]]] = [("", SidecarConfig)]
    done: set[str] = set()
    while sections:
        path, model = sections.pop(0)
        if path in done:
            continue
        done.add(path)
        title = f"`{path}`" if path else "Top level"
        lines += [f"## {title}", "", _doc(model), "", "| field | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            key = field.alias or name
            child = model_of(field.annotation)
            child_path = f"{path}.{key}" if path else key
            if child is not None:
                if _is_list(field.annotation):
                    child_path += "[]"
                sections.append((child_path, child))
            lines.append(
                f"| `{key}` | {_type(field.annotation)} | {_default(field, child is not None)} | "
                f"{_meaning(field, child, child_path)} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _doc(model: type[BaseModel]) -> str:
    text = (model.__doc__ or "").strip()
    return " ".join(text.replace("``", "`").split())


def _meaning(field: FieldInfo, child: type[BaseModel] | None, child_path: str) -> str:
    text = (field.description or (_doc(child) if child is not None else "")).replace("|", "\\|")
    if child is not None:
        text = f"{text} See [`{child_path}`](#{_anchor(child_path)}).".strip()
    return text


def _anchor(path: str) -> str:
    return "".join(c for c in path.lower() if c.isalnum() or c in "-_")


def _is_list(annotation: Any) -> bool:
    if get_origin(annotation) is list:
        return True
    return any(_is_list(arg) for arg in get_args(annotation) if get_origin(annotation) in (Union, types.UnionType))


def _type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_type(arg) for arg in get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation)
        return f"list of {_type(item)}"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, str(annotation))


def _default(field: FieldInfo, section: bool) -> str:
    if field.default_factory is not None:
        return "(section defaults)" if section else "`[]`"
    if field.default is PydanticUndefined:
        return "required"
    return f"`{json.dumps(field.default)}`"
