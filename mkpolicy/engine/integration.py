"""A policy's ``spec.integration`` compiled: Kueue's ``GenericJob`` methods in CEL.

Kueue v0.19.2's ``pkg/controller/jobframework/interface.go`` is the contract:
``IsSuspended``, ``Suspend``, ``RunWithPodSetsInfo`` (inject, then unsuspend),
``RestorePodSetsInfo``, ``Finished``, ``PodSets``, ``IsActive``, ``PodsReady`` and the optional
``JobWithPriorityClass`` and ``JobWithCustomStop``. The object is a plain JSON dict; every
method returns a new object and never modifies its input.

Suspension carries a marker: :meth:`CompiledIntegration.suspend` adds the
``kueue.mkpolicy.io/suspended-by-kueue`` annotation when it suspends a running object, and
:meth:`~CompiledIntegration.resume` applies the policy's resume patches only while that
annotation is there (removing it), so a suspension the user made is never lifted
(tekton-kueue's unconditional resume un-pends runs the user created pending).

Integration patches always fail on error (``failurePolicy`` does not apply): a skipped
suspend would leave an unadmitted job running.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mkpolicy.cel import Environment
from mkpolicy.cel.convert import to_json
from mkpolicy.cel.errors import EvalError
from mkpolicy.cel.values import Timestamp
from mkpolicy.engine.expressions import POLICY_VARIABLES, Locator, PolicyExpression
from mkpolicy.engine.mutation import CompiledMutation
from mkpolicy.engine.podsets import PodSetError, info_from_pod_set, merged_for_inject, validate_pod_sets
from mkpolicy.errors import CelError, PatchError
from mkpolicy.jsonvalues import json_equal
from mkpolicy.policy import Integration, JSONPatchMutation, Mutation
from mkpolicy.policy.model import SUSPENDED_BY_KUEUE
from mkpolicy.policy.source import Path

if TYPE_CHECKING:
    from mkpolicy.engine.adapter import Adapter

#: The variables of integration expressions: the policy's, plus ``podSetsInfo``.
INTEGRATION_VARIABLES = POLICY_VARIABLES | {"podSetsInfo"}

#: The methods whose expression is one CEL value (the others are patch lists).
VALUE_FIELDS = (
    ("isSuspended", "is_suspended"),
    ("podSets", "pod_sets"),
    ("finished", "finished"),
    ("active", "active"),
    ("priorityClass", "priority_class"),
    ("podsReady", "pods_ready"),
)
PATCH_FIELDS = (
    ("suspend", "suspend"),
    ("resume", "resume"),
    ("inject", "inject"),
    ("restore", "restore"),
    ("stop", "stop"),
)


@dataclass(frozen=True)
class Finished:
    """``Finished()``: whether the job is done, whether it succeeded, and why."""

    finished: bool
    success: bool = False
    message: str = ""


def patch_expression(item: Mutation) -> tuple[str, str]:
    """A mutation's expression text and the field holding it (``jsonPatch``/``applyConfiguration``)."""
    if isinstance(item, JSONPatchMutation):
        return item.json_patch.expression, "jsonPatch"
    return item.apply_configuration.expression, "applyConfiguration"


def integration_sites(spec: Integration) -> list[tuple[str, int | None, str, Path, str | None]]:
    """Every expression of ``spec``: (method, patch index or None, text, document path, patch type)."""
    out: list[tuple[str, int | None, str, Path, str | None]] = []
    for key, attr in VALUE_FIELDS:
        text = getattr(spec, attr)
        if text is not None:
            out.append((key, None, text, ("spec", "integration", key), None))
    for key, attr in PATCH_FIELDS:
        for i, item in enumerate(getattr(spec, attr) or []):
            text, field = patch_expression(item)
            out.append((key, i, text, ("spec", "integration", key, i, field, "expression"), item.type))
    return out


class CompiledIntegration:
    """``spec.integration`` compiled against its adapter (for params and variables)."""

    def __init__(self, adapter: Adapter, spec: Integration, locator: Locator) -> None:
        self.adapter = adapter
        self.spec = spec
        env = Environment.of(INTEGRATION_VARIABLES)
        name = adapter.policy.name
        self.values: dict[str, PolicyExpression] = {}
        self.patches: dict[str, list[CompiledMutation]] = {key: [] for key, _ in PATCH_FIELDS}
        for key, index, text, path, patch_type in integration_sites(spec):
            if index is None:
                self.values[key] = PolicyExpression(text, path, f"policy {name}: integration.{key}", locator, env)
            else:
                where = f"policy {name}: integration.{key} patch #{index + 1} ({patch_type})"
                expression = PolicyExpression(text, path, where, locator, env)
                self.patches[key].append(CompiledMutation(patch_type, expression))  # type: ignore[arg-type]
        self.custom_stop = spec.stop is not None

    def expressions(self) -> list[PolicyExpression]:
        """Every compiled expression of the section, in document order."""
        out = list(self.values.values())
        for mutations in self.patches.values():
            out += [m.expression for m in mutations]
        return out

    # -- evaluation -----------------------------------------------------------------------
    def _bindings(
        self, obj: Mapping[str, Any], infos: Sequence[Mapping[str, Any]] | None, workload: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        bindings: dict[str, Any] = {
            "object": obj,
            "managerObject": obj,
            "workerObject": None,
            "workload": dict(workload) if workload is not None else None,
            "workloadName": (workload or {}).get("metadata", {}).get("name", ""),
            "origin": "",
            "cluster": "",
            "now": Timestamp.from_datetime(_dt.datetime.now(_dt.UTC).replace(microsecond=0)),
            "params": self.adapter.params,
            "podSetsInfo": [dict(i) for i in infos] if infos is not None else None,
        }
        self.adapter.variables.bind(bindings)
        return bindings

    def _value(self, key: str, obj: Mapping[str, Any], workload: Mapping[str, Any] | None = None) -> Any:
        expression = self.values[key]
        return expression.evaluate(self._bindings(obj, None, workload))

    def _bool(self, key: str, obj: Mapping[str, Any]) -> bool:
        value = self._value(key, obj)
        if type(value) is not bool:
            raise CelError(
                f"integration.{key} must return a bool; found {type(value).__name__} {value!r}",
                self.values[key].location(),
            )
        return value

    def _patch(
        self,
        key: str,
        obj: Mapping[str, Any],
        infos: Sequence[Mapping[str, Any]] | None = None,
        workload: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        target = dict(obj)
        schema = self.adapter._merge_schema
        for mutation in self.patches[key]:
            bindings = self._bindings(target, infos, workload)
            target = mutation.apply(target, bindings, schema)
            if not isinstance(target, dict):
                raise PatchError(
                    f"integration.{key}: the object must stay a JSON object", mutation.expression.location()
                )
        return target

    # -- GenericJob -----------------------------------------------------------------------
    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        """``IsSuspended()``."""
        return self._bool("isSuspended", obj)

    @staticmethod
    def suspended_by_kueue(obj: Mapping[str, Any]) -> bool:
        """Whether the suspension is Kueue's (the marker annotation is set)."""
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return annotations.get(SUSPENDED_BY_KUEUE) == "true"

    def suspend(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``Suspend()``: the suspend patches plus the marker; unchanged when already suspended
        (a suspension that is the user's stays the user's)."""
        if self.is_suspended(obj):
            return dict(obj)
        out = with_marker(self._patch("suspend", obj), True)
        if not self.is_suspended(out):
            raise PatchError(
                "integration.suspend: after the suspend patches isSuspended is still false",
                self.values["isSuspended"].location(),
            )
        return out

    def resume(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Undo :meth:`suspend`: only while the marker is set (then removed)."""
        if not self.suspended_by_kueue(obj):
            return dict(obj)
        out = with_marker(self._patch("resume", obj), False)
        if self.is_suspended(out):
            raise PatchError(
                "integration.resume: after the resume patches isSuspended is still true",
                self.values["isSuspended"].location(),
            )
        return out

    def pod_sets(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``PodSets()``: validated against the Workload API and defaulted."""
        expression = self.values["podSets"]
        try:
            value = to_json(self._value("podSets", obj))
        except EvalError as exc:
            raise CelError(f"integration.podSets: {exc.message}", expression.location()) from None
        try:
            return validate_pod_sets(value)
        except PodSetError as exc:
            raise CelError(f"integration.podSets: {exc}", expression.location()) from None

    def inject(
        self, obj: Mapping[str, Any], infos: Sequence[Mapping[str, Any]], workload: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The inject patches with ``podSetsInfo`` = each podSet's template values merged with
        the admission's ``infos`` (:func:`~mkpolicy.engine.podsets.merged_for_inject`); raises
        :class:`~mkpolicy.engine.podsets.PodSetConflict` on a conflict (a permanent failure)."""
        merged = merged_for_inject(self.pod_sets(obj), infos)
        return self._patch("inject", obj, merged, workload)

    def start(
        self, obj: Mapping[str, Any], infos: Sequence[Mapping[str, Any]], workload: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``RunWithPodSetsInfo``: inject, then resume (one write)."""
        return self.resume(self.inject(obj, infos, workload))

    def restore(self, obj: Mapping[str, Any], pod_sets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``RestorePodSetsInfo``: the restore patches with ``podSetsInfo`` taken from the
        Workload's podSets (``GetPodSetsInfoFromWorkload``), the templates as they were."""
        return self._patch("restore", obj, [info_from_pod_set(ps) for ps in pod_sets])

    def stop(self, obj: Mapping[str, Any], pod_sets: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        """``stopJob``: the custom stop patches, or suspend then restore (one write); without
        the Workload's podSets (no Workload) only suspend."""
        if self.custom_stop:
            infos = [info_from_pod_set(ps) for ps in pod_sets] if pod_sets is not None else None
            out = self._patch("stop", obj, infos)
            # A custom stop that suspends (rather than ends) the job suspends it for Kueue: marked,
            # so that the next admission resumes it.
            if not self.is_suspended(obj) and self.is_suspended(out):
                out = with_marker(out, True)
            return out
        out = self.suspend(obj)
        return self.restore(out, pod_sets) if pod_sets is not None else out

    def finished(self, obj: Mapping[str, Any]) -> Finished:
        """``Finished()``."""
        expression = self.values["finished"]
        value = self._value("finished", obj)
        if not isinstance(value, Mapping) or type(value.get("finished")) is not bool:
            raise CelError(
                f"integration.finished must return a map with a bool 'finished'; found {value!r}",
                expression.location(),
            )
        success, message = value.get("success", False), value.get("message", "")
        if type(success) is not bool or type(message) is not str:
            raise CelError(
                "integration.finished: 'success' must be a bool and 'message' a string", expression.location()
            )
        return Finished(value["finished"], success, message)

    def active(self, obj: Mapping[str, Any]) -> bool:
        """``IsActive()``."""
        return self._bool("active", obj)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool | None:
        """``PodsReady()``; None when the policy has no ``podsReady``."""
        return self._bool("podsReady", obj) if "podsReady" in self.values else None

    def priority_class(self, obj: Mapping[str, Any]) -> str | None:
        """``JobWithPriorityClass.PriorityClass()``; None when the policy has none."""
        if "priorityClass" not in self.values:
            return None
        value = self._value("priorityClass", obj)
        if type(value) is not str:
            raise CelError(
                f"integration.priorityClass must return a string; found {value!r}",
                self.values["priorityClass"].location(),
            )
        return value


def with_marker(obj: dict[str, Any], present: bool) -> dict[str, Any]:
    """``obj`` with the suspended-by-Kueue annotation set (``present``) or removed."""
    meta = dict(obj.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    if present:
        annotations[SUSPENDED_BY_KUEUE] = "true"
    else:
        annotations.pop(SUSPENDED_BY_KUEUE, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


def same_object(a: Any, b: Any) -> bool:
    """JSON equality where an empty map or list equals an absent field, as Go's ``maps.Equal``
    and ``slices.Equal`` compare the fields ``RestorePodSpec`` restores (nil equals empty)."""
    return json_equal(_prune(a), _prune(b))


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != {} and v != []}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value
