"""``mkpolicy init``: scaffold a policy, its test suite and example objects.

The scaffold passes ``mkpolicy lint`` and ``mkpolicy test`` as written: the suite's
expected worker copy and status patch are recorded by running the new policy through
the engine (the same code path as ``mkpolicy test --update-snapshots``).
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass
from typing import Any

from mkpolicy.engine import DEFAULT_ORIGIN
from mkpolicy.engine.generic import clone, remove_pointer
from mkpolicy.errors import InputError, Location, PolicyError
from mkpolicy.jsonvalues import copy_json
from mkpolicy.policy import DEFAULT_MANAGED_BY_PATH, GVK, MULTIKUEUE_CONTROLLER, parse_gvk
from mkpolicy.policy.model import check_pointer
from mkpolicy.structural import Schema, read_schema_document
from mkpolicy.structural.trim import trim_crd

_MAX_EXAMPLE_DEPTH = 8


@dataclass(frozen=True)
class Scaffold:
    """The files ``init`` writes: path -> content."""

    policy_file: str
    suite_file: str
    files: dict[str, str]


def policy_name(gvk: GVK) -> str:
    """``tekton-pipelinerun`` for PipelineRun.v1.tekton.dev, ``batch-job`` for Job.v1.batch."""
    kind = gvk.kind.lower()
    return f"{gvk.group.split('.')[0]}-{kind}" if gvk.group else kind


def load_crd(path: str, gvk: GVK) -> tuple[dict[str, Any], Schema]:
    """The CRD document at ``path`` and the schema of the framework's version."""
    try:
        document = read_schema_document(path)
    except PolicyError as exc:
        raise InputError(exc.message, exc.location) from None
    return document, crd_schema(document, gvk, path)


def crd_schema(document: Any, gvk: GVK, path: str) -> Schema:
    """The schema of the framework's version in ``document`` (read from ``path``), which
    must be the CRD of the framework's kind and group."""
    if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
        raise InputError("expected a CustomResourceDefinition", Location(path))
    spec = document.get("spec") or {}
    group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
    if group != gvk.group or kind != gvk.kind:
        raise InputError(
            f"the CRD is for kind {kind!r} in group {group!r}; expected {gvk.kind!r} in {gvk.group!r}", Location(path)
        )
    try:
        return Schema.from_document(document, gvk.version, path)
    except PolicyError as exc:
        raise InputError(exc.message, exc.location) from None


def find_managed_by(schema: Schema | None) -> str | None:
    """Where the kind keeps its managedBy field: ``/spec/managedBy`` when there is no
    schema or it declares it, another string field named ``managedBy`` (breadth first),
    or None when the kind has none."""
    if schema is None:
        return DEFAULT_MANAGED_BY_PATH
    spec = schema.field("spec")
    if spec.known and spec.type == "object" and (spec.node or {}).get("properties", {}).get("managedBy") is not None:
        return DEFAULT_MANAGED_BY_PATH
    queue: deque[tuple[Schema, str, int]] = deque([(spec, "/spec", 1)])
    while queue:
        node, path, depth = queue.popleft()
        props = (node.node or {}).get("properties")
        if not isinstance(props, dict) or depth > 4:
            continue
        for name in sorted(props):
            child = node.field(name)
            if name == "managedBy" and child.type == "string":
                return f"{path}/{name}"
            if child.type == "object":
                queue.append((child, f"{path}/{name}", depth + 1))
    return None


def example_value(schema: Schema, depth: int = 0) -> Any:
    """A small value the schema accepts: required fields only, first enum values."""
    node = schema.node or {}
    if "default" in node:
        return node["default"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    if schema.int_or_string:
        return 1
    kind = schema.type
    if kind == "object":
        out: dict[str, Any] = {}
        if depth < _MAX_EXAMPLE_DEPTH:
            for name in node.get("required") or []:
                out[str(name)] = example_value(schema.field(str(name)), depth + 1)
        return out
    if kind == "array":
        if int(node.get("minItems") or 0) > 0 and depth < _MAX_EXAMPLE_DEPTH:
            return [example_value(schema.items(), depth + 1)]
        return []
    if kind == "string":
        return "2026-01-01T00:00:00Z" if node.get("format") == "date-time" else "example"
    if kind == "integer":
        return int(node.get("minimum") or 1)
    if kind == "number":
        return node.get("minimum") or 1
    if kind == "boolean":
        return False
    return {}


def _set_pointer(obj: dict[str, Any], pointer: str, value: Any) -> None:
    tokens = check_pointer(pointer)
    cur = obj
    for token in tokens[:-1]:
        nxt = cur.get(token)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[token] = nxt
        cur = nxt
    cur[tokens[-1]] = value


def example_objects(
    gvk: GVK, schema: Schema | None, managed_by: str | None, workload_name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manager's example object and the worker's copy of it (as Kueue's generic
    adapter creates it) with a status."""
    spec = copy_json(example_value(schema.field("spec"))) if schema is not None else {}
    manager: dict[str, Any] = {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "metadata": {
            "name": "example",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": spec if isinstance(spec, dict) else {},
    }
    if managed_by is not None:
        _set_pointer(manager, managed_by, MULTIKUEUE_CONTROLLER)
    worker = clone(manager, workload_name, DEFAULT_ORIGIN, "annotation")
    if managed_by is not None:
        worker = remove_pointer(worker, check_pointer(managed_by))
    worker["status"] = _example_status(schema)
    return manager, worker


def _example_status(schema: Schema | None) -> dict[str, Any]:
    props = ((schema.field("status").node or {}).get("properties") or {}) if schema is not None else {}
    status: dict[str, Any] = {}
    if "phase" in props:
        status["phase"] = "Running"
    if "conditions" in props or not status:
        status["conditions"] = [
            {
                "type": "Running",
                "status": "True",
                "reason": "Example",
                "message": "the job runs on the worker",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    return status


def _yaml(value: Any) -> str:
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))


_POLICY = """\
# {kind} ({framework}) through MultiKueue, scaffolded by 'mkpolicy init'.
# With no patches the policy behaves exactly like Kueue's generic adapter: the worker
# copy is the manager's object without {managed_by_text} and with Kueue's markers, and
# the worker's status is copied back. Add patches below, then record the new expected
# outputs with 'mkpolicy test --update-snapshots' and review the diff.
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: {name}
spec:
  framework: {framework}
{managed_by}{schema}  failurePolicy: Fail
  creation:
    patches: []
    # Examples (JSONPatch and ApplyConfiguration, as in MutatingAdmissionPolicy):
    # - type: JSONPatch
    #   jsonPatch:
    #     expression: |
    #       has(object.metadata.annotations) && "example.com/local-only" in object.metadata.annotations
    #         ? [JSONPatch{{op: "remove", path: "/metadata/annotations/example.com~1local-only"}}]
    #         : []
    # - type: ApplyConfiguration
    #   applyConfiguration:
    #     expression: |
    #       Object{{metadata: Object.metadata{{annotations: {{"example.com/dispatched-to": cluster}}}}}}
  sync:
{subresource}    patches: []
    # Without patches: status := workerObject.status. To copy only some fields:
    # - type: JSONPatch
    #   jsonPatch:
    #     expression: |
    #       has(workerObject.status) ? [JSONPatch{{op: "add", path: "/status", value: {{
    #         ?"conditions": workerObject.status.?conditions
    #       }}}}] : []
"""

_SUITE = """\
# Test suite of {policy_file} (docs/policy-tests.md), scaffolded by 'mkpolicy init'.
# Run it with 'mkpolicy test {suite_file}'; after changing the policy, record the new
# outputs with 'mkpolicy test --update-snapshots' and review the diff.
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicyTest
metadata:
  name: {name}
spec:
  policy: {policy_file}
  context:
    workloadName: {workload}
    origin: multikueue
    cluster: worker1
    identifier: annotation
  cases:
    - name: creates the worker copy
      phase: create
      managerObjectFile: {manager_file}
    - name: writes the status back
      phase: sync
      managerObjectFile: {manager_file}
      workerObjectFile: {worker_file}
{not_managed}"""

_NOT_MANAGED = """\
    - name: leaves objects without managedBy alone
      phase: create
      managerObject:
{object}      expect:
        notManaged: true
"""


def _subresource(document: Any, gvk: GVK) -> str:
    """The ``sync.subresource`` line: ``none`` when the CRD's version serves no ``/status``."""
    versions = ((document or {}).get("spec") or {}).get("versions") if isinstance(document, dict) else None
    for version in versions or []:
        if (
            isinstance(version, dict)
            and version.get("name") == gvk.version
            and "status" not in (version.get("subresources") or {})
        ):
            return (
                "    # The CRD has no status subresource: the sidecar writes the status to the object\n"
                "    # itself and hands Kueue the worker's copy without it (mkpolicy lint MKP405).\n"
                "    subresource: none\n"
            )
    return "    subresource: status\n"


def scaffold(framework: str, directory: str, crd: str | None = None) -> Scaffold:
    """The files of a new policy for ``framework`` in ``directory`` (nothing is written)."""
    gvk = parse_gvk(framework)
    document, schema = load_crd(crd, gvk) if crd is not None else (None, None)
    managed_by = find_managed_by(schema)
    name = policy_name(gvk)
    policy_file = os.path.join(directory, f"{name}.yaml")
    suite_file = os.path.join(directory, f"{name}.test.yaml")
    manager_file = os.path.join(directory, "examples", f"{name}.yaml")
    worker_file = os.path.join(directory, "examples", f"{name}-worker.yaml")
    if managed_by is None:
        managed_by_block = (
            "  # The CRD has no managedBy field: every object is managed. Stock Kueue's generic\n"
            "  # adapter cannot carry such kinds (mkpolicy lint MKP402): the sidecar skips the\n"
            "  # policy; it runs through mkpolicy's Python API only. For a CRD you may change, give\n"
            "  # it spec.managedBy on the manager (mkpolicy export crd-patch) and use that.\n"
            "  managedBy: null\n"
        )
        managed_by_text = "its Kueue markers"
    else:
        managed_by_block = f"  managedBy:\n    path: {managed_by}\n    value: {MULTIKUEUE_CONTROLLER}\n"
        managed_by_text = managed_by
    schema_line = ""
    schema_file = os.path.join(directory, f"{name}.schema.json")
    if document is not None:
        # Beside the policy, trimmed: the policies ConfigMap is flat and holds 1 MiB.
        schema_line = (
            f"  schema: {os.path.basename(schema_file)}   # the CRD, trimmed (mkpolicy trim-schema): "
            "deploy it beside the policy\n"
        )
    workload = f"{gvk.kind.lower()}-example-1a2b3"
    manager, worker = example_objects(gvk, schema, managed_by, workload)
    not_managed = ""
    if managed_by is not None:
        unmarked = remove_pointer(manager, check_pointer(managed_by))
        body = "".join("        " + line + "\n" for line in _yaml(unmarked).splitlines())
        not_managed = _NOT_MANAGED.format(object=body)
    files = {
        policy_file: _POLICY.format(
            kind=gvk.kind,
            framework=str(gvk),
            name=name,
            managed_by=managed_by_block,
            managed_by_text=managed_by_text,
            schema=schema_line,
            subresource=_subresource(document, gvk),
        ),
        suite_file: _SUITE.format(
            name=name,
            policy_file=os.path.basename(policy_file),
            suite_file=os.path.basename(suite_file),
            workload=workload,
            manager_file=f"examples/{name}.yaml",
            worker_file=f"examples/{name}-worker.yaml",
            not_managed=not_managed,
        ),
        manager_file: f"# An example {gvk.kind} as a user submits it on the manager cluster.\n" + _yaml(manager),
        worker_file: f"# The worker's copy of the example {gvk.kind}, with the status it reports.\n" + _yaml(worker),
    }
    if document is not None:
        files[schema_file] = json.dumps(trim_crd(document, gvk.version, crd or ""), separators=(",", ":")) + "\n"
    return Scaffold(policy_file, suite_file, files)


def write(scaffold_: Scaffold, force: bool = False) -> list[str]:
    """Write the files (refusing to overwrite unless ``force``), then record the suite's
    expected outputs by running it. Returns the files written."""
    existing = [path for path in scaffold_.files if os.path.exists(path)]
    if existing and not force:
        raise InputError(f"would overwrite {', '.join(existing)}; use --force", Location(existing[0]))
    for path, content in scaffold_.files.items():
        directory = os.path.dirname(path)
        try:
            if directory:
                os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(content)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", Location(path)) from None
    _record_expectations(scaffold_.suite_file)
    return list(scaffold_.files)


def _record_expectations(suite_file: str) -> None:
    from mkpolicy.lint.suite.runner import run_paths
    from mkpolicy.lint.suite.snapshots import update_snapshots

    run = run_paths([suite_file])
    update_snapshots(run)
    if not run.ok:
        problems = [
            f"{case.name}: {case.message}" for suite in run.suites for case in suite.cases if case.status != "passed"
        ] + [str(suite.error) for suite in run.suites if suite.error is not None]
        raise PolicyError("the scaffolded suite does not pass: " + "; ".join(problems), Location(suite_file))
