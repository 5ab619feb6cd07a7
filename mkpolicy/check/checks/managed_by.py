"""The managedBy field against the schema (MKP301, MKP302) and stock Kueue's expectations (MKP4xx)."""

from __future__ import annotations

from mkpolicy.check.celpaths import pointer
from mkpolicy.check.checks.context import PolicyContext
from mkpolicy.policy import DEFAULT_MANAGED_BY_PATH, MULTIKUEUE_CONTROLLER
from mkpolicy.policy.kueue import generic_adapter_gap
from mkpolicy.policy.model import check_pointer
from mkpolicy.structural import Schema, is_absent

_WIRE = (
    "the sidecar cannot change that and skips the policy: it runs only through mkpolicy's Python API "
    "(a controller mode is planned)"
)
_SIDECAR = "only mkpolicy honours this (its sidecar, or the Python API)"
#: The one description of ``sync.mode: none`` on the wire (docs/policy-format.md and docs/lint-rules.md say the same).
SYNC_MODE_NONE = (
    "through the sidecar, stock Kueue still writes a status after each read of the worker's copy, and the sidecar "
    "hands it the manager's own current status: the write changes nothing, unless the manager's controller changed "
    "the status in between (Kueue's merge patch carries no resourceVersion), which puts the older status back"
)


def check_managed_by_schema(ctx: PolicyContext) -> None:
    """managedBy.path must name a string field of the framework's schema."""
    managed_by = ctx.policy.spec.managed_by
    if managed_by is None or ctx.schema is None:
        return
    where = ctx.at(("spec", "managedBy", "path"))
    schema: Schema = ctx.schema
    walked = ""
    for token in check_pointer(managed_by.path):
        if not schema.known:
            return  # unknown territory (x-kubernetes-preserve-unknown-fields): anything goes
        if schema.type == "array":
            if not token.isdigit():
                ctx.report(
                    "MKP301",
                    f"managedBy.path {managed_by.path!r}: {walked or '/'} is a list in the schema; "
                    f"expected a list index, found {token!r}",
                    where,
                )
                return
            schema = schema.items()
        else:
            child = schema.field(token)
            if is_absent(child):
                ctx.report(
                    "MKP301",
                    f"managedBy.path {managed_by.path!r}: the schema of {ctx.policy.spec.framework} has no field "
                    f"{token!r} under {walked or '/'}{fields_hint(schema)}",
                    where,
                )
                return
            schema = child
        walked += pointer([token])
    if schema.known and schema.type is not None and schema.type != "string":
        ctx.report(
            "MKP302",
            f"managedBy.path {managed_by.path!r}: expected a string field; the schema says {schema.type}",
            where,
        )


def fields_hint(schema: Schema) -> str:
    """`` (it has: a, b, ...)`` listing an object schema's declared fields, or nothing."""
    props = (schema.node or {}).get("properties")
    if isinstance(props, dict) and props:
        names = sorted(props)
        more = f", ... ({len(names)} fields)" if len(names) > 8 else ""
        return f" (it has: {', '.join(names[:8])}{more})"
    return ""


def check_stock_kueue(ctx: PolicyContext) -> None:
    """Warn about format features Kueue's generic adapter cannot honour (MKP401-MKP407)."""
    spec = ctx.policy.spec
    if spec.match_conditions and generic_adapter_gap(ctx.policy) is None:
        ctx.report(
            "MKP407",
            'matchConditions cannot keep an object from being dispatched: stock Kueue decides "managed by '
            f'MultiKueue" by {DEFAULT_MANAGED_BY_PATH} alone and sends every such object to a worker; when a '
            "match condition is false, the sidecar refuses the creation and Kueue retries it forever (the job holds "
            f"its quota). Select the objects to dispatch by {DEFAULT_MANAGED_BY_PATH}, or make sure every "
            "dispatched object matches",
            ctx.at(("spec", "matchConditions"), key=True),
        )
    if spec.managed_by is None:
        ctx.report(
            "MKP402",
            "managedBy: null (every object is managed): stock Kueue's generic adapter only manages objects "
            f"whose /spec/managedBy is {MULTIKUEUE_CONTROLLER!r}; {_WIRE}",
            ctx.at(("spec", "managedBy")),
        )
    else:
        if spec.managed_by.path != DEFAULT_MANAGED_BY_PATH:
            ctx.report(
                "MKP401",
                f"managedBy.path is {spec.managed_by.path!r}: stock Kueue's generic adapter only checks "
                f"{DEFAULT_MANAGED_BY_PATH}, so objects marked at this path are never dispatched; {_WIRE}",
                ctx.at(("spec", "managedBy", "path")),
            )
        if spec.managed_by.value != MULTIKUEUE_CONTROLLER:
            ctx.report(
                "MKP403",
                f"managedBy.value is {spec.managed_by.value!r}: stock Kueue's generic adapter only dispatches "
                f"objects whose managedBy is {MULTIKUEUE_CONTROLLER!r}; {_WIRE}",
                ctx.at(("spec", "managedBy", "value")),
            )
    if spec.sync.mode == "none":
        ctx.report(
            "MKP404",
            "sync.mode: none: stock Kueue's generic adapter always copies a status; " + SYNC_MODE_NONE,
            ctx.at(("spec", "sync", "mode")),
        )
    if spec.sync.subresource == "none":
        ctx.report(
            "MKP405",
            "sync.subresource: none: stock Kueue's generic adapter writes status through the status "
            "subresource, which this kind does not have; only mkpolicy's sidecar carries it (it hands Kueue the "
            "worker's object without status and writes the status to the manager's object itself), so Kueue must "
            "reach the workers through the sidecar only (mkpolicy sidecar --check)",
            ctx.at(("spec", "sync", "subresource")),
        )
    identifier = spec.creation.workload_identifier
    if identifier != "context":
        detail = {
            "none": "it always records the prebuilt-workload name on the worker copy",
            "annotation": "it uses a label instead when the WorkloadIdentifierAnnotations feature gate is off",
            "label": "it uses the annotation when the WorkloadIdentifierAnnotations feature gate is on "
            "(the default since Kueue 0.18)",
        }[identifier]
        ctx.report(
            "MKP406",
            f"creation.workloadIdentifier is {identifier!r}: stock Kueue's generic adapter decides where the "
            f"prebuilt-workload name goes and {detail}; {_SIDECAR}, or use 'context' to follow Kueue",
            ctx.at(("spec", "creation", "workloadIdentifier")),
        )
