"""The FrameworkPolicy document (``mkpolicy.io/v1alpha1``) as pydantic models.

Field names are snake_case in Python and camelCase in YAML (the aliases). Unknown
fields are errors. Descriptions here become the JSON Schema that editors use.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from mkpolicy.errors import Location
from mkpolicy.policy.gvk import DNS_SUBDOMAIN, GVK, parse_gvk
from mkpolicy.policy.source import Path, SourceMap

API_VERSION = "mkpolicy.io/v1alpha1"
KIND = "FrameworkPolicy"
DEFAULT_MANAGED_BY_PATH = "/spec/managedBy"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"

_CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        str_strip_whitespace=False,
    )


class Metadata(_Model):
    """Standard object metadata (only the fields a policy uses)."""

    name: str = Field(description="Policy name: a DNS-1123 subdomain (lower case, digits, '-', '.').")
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Free-form annotations.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > 253 or not DNS_SUBDOMAIN.match(value):
            raise ValueError(
                f"expected a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'); found {value!r}"
            )
        return value


class ManagedBy(_Model):
    """Which field marks an object as managed by MultiKueue, and the value it must hold."""

    path: str = Field(
        default=DEFAULT_MANAGED_BY_PATH,
        description="RFC 6901 JSON pointer to the managedBy field. Stock Kueue only checks /spec/managedBy.",
    )
    value: str = Field(default=MULTIKUEUE_CONTROLLER, description="The value that means 'managed by MultiKueue'.")

    @field_validator("path")
    @classmethod
    def _pointer(cls, value: str) -> str:
        check_pointer(value)
        return value


def check_pointer(value: str) -> list[str]:
    """Validate an RFC 6901 JSON pointer to a field and return its decoded tokens."""
    if not value.startswith("/") or value == "/":
        raise ValueError(f"expected a JSON pointer such as '/spec/managedBy'; found {value!r}")
    tokens = value[1:].split("/")
    for token in tokens:
        if token == "":
            raise ValueError(f"expected a JSON pointer without empty segments; found {value!r}")
        if re.search(r"~(?![01])", token):
            raise ValueError(f"'~' must be escaped as '~0' (and '/' as '~1') in a JSON pointer; found {value!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


class Expression(_Model):
    """A CEL expression."""

    expression: str = Field(description="A CEL expression in the Kubernetes dialect.")


class NamedExpression(_Model):
    """A named CEL expression (match condition or variable)."""

    name: str = Field(description="A name: letters, digits and '_' (a CEL identifier).")
    expression: str = Field(description="A CEL expression in the Kubernetes dialect.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _CEL_IDENT.match(value):
            raise ValueError(f"expected a CEL identifier (letters, digits, '_'); found {value!r}")
        return value


class JSONPatchMutation(_Model):
    """A CEL expression returning a list of ``JSONPatch{op, path, from, value}``."""

    type: Literal["JSONPatch"] = Field(description="JSONPatch: RFC 6902 operations built in CEL.")
    json_patch: Expression = Field(description="expression: a list of JSONPatch{...} values.")


class ApplyConfigurationMutation(_Model):
    """A CEL expression returning an ``Object{...}`` merged with server-side-apply rules."""

    type: Literal["ApplyConfiguration"] = Field(description="ApplyConfiguration: an Object{...} merged in.")
    apply_configuration: Expression = Field(description="expression: an Object{...} value.")


Mutation = Annotated[JSONPatchMutation | ApplyConfigurationMutation, Field(discriminator="type")]


class Creation(_Model):
    """How the worker copy is built from the manager's object."""

    workload_identifier: Literal["context", "annotation", "label", "none"] = Field(
        default="context",
        description=(
            "Where the prebuilt-workload name goes: 'context' follows the engine's context "
            "(annotation by default, label mode for Kueue builds without WorkloadIdentifierAnnotations); "
            "'annotation'/'label' force one; 'none' leaves it out (LeaderWorkerSet). "
            "Anything but 'context' differs from stock Kueue's generic adapter."
        ),
    )
    patches: list[Mutation] = Field(default_factory=list, description="Applied in order to the worker copy.")


class Sync(_Model):
    """How the worker's progress is written back to the manager's object."""

    mode: Literal["writeBack", "none"] = Field(
        default="writeBack",
        description="'writeBack' (default) computes a status patch; 'none' never writes status back.",
    )
    subresource: Literal["status", "none"] = Field(
        default="status",
        description="'status' (default): only /status may change. 'none': the CRD has no status subresource.",
    )
    patches: list[Mutation] = Field(
        default_factory=list,
        description="Applied in order to the manager's object; none means status := workerObject.status.",
    )

    @model_validator(mode="after")
    def _no_patches_without_write_back(self) -> Sync:
        if self.mode == "none" and self.patches:
            raise ValueError("sync.patches are never applied with sync.mode 'none'; remove them or the mode")
        return self


#: The annotation the integration sets when *it* suspends an object (and only then):
#: ``resume`` lifts a suspension only while it is there, so a user's own suspend stays.
SUSPENDED_BY_KUEUE = "kueue.mkpolicy.io/suspended-by-kueue"


class Integration(_Model):
    """A declarative Kueue integration: what Kueue's Go ``GenericJob`` methods say, in CEL.

    ``mkpolicy controller`` runs Kueue's job reconciler with these; ``mkpolicy export
    admission`` turns ``isSuspended``/``suspend`` into admission policies.
    """

    is_suspended: str = Field(description="IsSuspended: a CEL bool, true while the object is suspended.")
    suspend: list[Mutation] = Field(
        min_length=1,
        description=(
            "Suspend: patches that suspend a running object. The controller adds the "
            f"{SUSPENDED_BY_KUEUE} annotation in the same write."
        ),
    )
    resume: list[Mutation] = Field(
        min_length=1,
        description=(
            f"Undo the suspension: applied only while the {SUSPENDED_BY_KUEUE} annotation is set "
            "(which is then removed), so a suspension the user made is never lifted."
        ),
    )
    pod_sets: str = Field(
        description=(
            "PodSets: a CEL list of 1 to 18 maps {name, count, template, minCount?}: the Workload's "
            "spec.podSets (name a DNS-1123 label, count >= 0, template a PodTemplateSpec)."
        )
    )
    inject: list[Mutation] = Field(
        default_factory=list,
        description=(
            "RunWithPodSetsInfo: patches writing podSetsInfo (one map per podSet: name, count, "
            "nodeSelector, tolerations, labels, annotations, schedulingGates from the admission) "
            "into the object; applied before resume, in the same write."
        ),
    )
    restore: list[Mutation] = Field(
        default_factory=list,
        description=(
            "RestorePodSetsInfo: patches writing podSetsInfo (here the originals, from the Workload's "
            "podSet templates) back, so the object is what it was before inject."
        ),
    )
    finished: str = Field(
        description="Finished: a CEL map {finished: bool, success: bool, message: string} (only finished required)."
    )
    active: str = Field(description="IsActive: a CEL bool, true while pods still run (quota is held until false).")
    priority_class: str | None = Field(
        default=None, description="JobWithPriorityClass: a CEL string naming a PriorityClass ('' for none)."
    )
    pods_ready: str | None = Field(
        default=None, description="PodsReady: a CEL bool for waitForPodsReady (the PodsReady condition)."
    )
    stop: list[Mutation] | None = Field(
        default=None,
        description=(
            "JobWithCustomStop: patches that stop the object instead of suspend + restore "
            "(e.g. Tekton's StoppedRunFinally, which is terminal)."
        ),
    )


class Spec(_Model):
    """What the policy applies to and what it does."""

    framework: str = Field(
        description="The job kind, as Kueue names it: Kind.version.group (e.g. PipelineRun.v1.tekton.dev)."
    )
    managed_by: ManagedBy | None = Field(
        default_factory=ManagedBy,
        description="Where managedBy lives; null when the kind has none (every object is managed).",
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Optional CRD YAML or OpenAPI v3 schema file, relative to this policy file.",
    )
    params: dict[str, Any] | None = Field(default=None, description="Free-form values, visible to CEL as params.")
    match_conditions: list[NamedExpression] = Field(
        default_factory=list, description="All must be true, or the object is not managed."
    )
    variables: list[NamedExpression] = Field(
        default_factory=list, description="Evaluated lazily; visible to CEL as variables.<name>."
    )
    failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail", description="Fail: an evaluation error stops the step. Ignore: the patch is skipped."
    )
    creation: Creation = Field(default_factory=Creation, description="Creation patches (worker copy).")
    sync: Sync = Field(default_factory=Sync, description="Status write-back.")
    integration: Integration | None = Field(
        default=None,
        description="Optional: queue this kind with Kueue through mkpolicy's controller (no Go integration).",
    )

    @field_validator("framework")
    @classmethod
    def _framework(cls, value: str) -> str:
        parse_gvk(value)
        return value

    @field_validator("match_conditions", "variables")
    @classmethod
    def _unique_names(cls, value: list[NamedExpression]) -> list[NamedExpression]:
        seen: dict[str, int] = {}
        for i, item in enumerate(value):
            if item.name in seen:
                raise PydanticCustomError(
                    "duplicate_name",
                    "duplicate name '{name}' (items {first} and {second}): every name must be unique",
                    {"name": item.name, "first": seen[item.name], "second": i},
                )
            seen[item.name] = i
        return value

    @property
    def gvk(self) -> GVK:
        """The framework as a parsed :class:`GVK`."""
        return parse_gvk(self.framework)


class FrameworkPolicy(_Model):
    """A FrameworkPolicy: how MultiKueue creates and syncs one external job kind."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        json_schema_extra={"title": "FrameworkPolicy"},
    )

    api_version: Literal["mkpolicy.io/v1alpha1"] = Field(description="Always mkpolicy.io/v1alpha1.")
    kind: Literal["FrameworkPolicy"] = Field(description="Always FrameworkPolicy.")
    metadata: Metadata
    spec: Spec

    _source: SourceMap | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        """The policy's ``metadata.name``."""
        return self.metadata.name

    @property
    def source(self) -> SourceMap | None:
        """Where the policy was loaded from (None when built in Python)."""
        return self._source

    @property
    def file(self) -> str | None:
        """The file the policy was loaded from."""
        return self._source.file if self._source is not None else None

    @property
    def schema_file(self) -> str | None:
        """The file ``spec.schema`` names, resolved against the policy's directory."""
        ref = self.spec.schema_
        if ref is None:
            return None
        known = self.file is not None and not self.file.startswith("<")
        base = os.path.dirname(self.file) if known and self.file else os.getcwd()
        return os.path.normpath(ref if os.path.isabs(ref) else os.path.join(base, ref))

    def locate(
        self, path: Path, *, value: str | None = None, offset: int | None = None, where: str | None = None
    ) -> Location:
        """The file location of ``path`` in this policy's document.

        With ``value`` (the string at ``path``) and ``offset``, the location of that
        character inside the string: how CEL errors point into YAML.
        """
        if self._source is None:
            return Location(where=where)
        if value is not None and offset is not None:
            return self._source.expression_location(path, value, offset, where)
        return self._source.location(path, where=where)
