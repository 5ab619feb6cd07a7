"""Compile a FrameworkPolicy into an :class:`Adapter` that creates and syncs objects.

Semantics (docs/architecture.md, "Semantics"): creation starts from Kueue's generic clone, applies the
creation patches in order and checks the invariants after each; status write-back
starts from the manager's object, applies the sync patches and returns a JSON merge
patch for the status subresource. With no patches an adapter behaves exactly like
Kueue's generic adapter.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from mkpolicy.cel import Environment
from mkpolicy.cel.ast import Ident
from mkpolicy.cel.values import Timestamp
from mkpolicy.engine.apply import merge_schema
from mkpolicy.engine.context import Context
from mkpolicy.engine.expressions import POLICY_VARIABLES, Locator, PolicyExpression, Variables, VariableScope
from mkpolicy.engine.generic import (
    FORBIDDEN_METADATA,
    ORIGIN_LABEL,
    PREBUILT_WORKLOAD_KEY,
    clone,
    get_pointer,
    identifier_place,
    remove_pointer,
)
from mkpolicy.engine.integration import CompiledIntegration
from mkpolicy.engine.mutation import CompiledMutation, too_deep
from mkpolicy.errors import CelError, Location, MkpolicyError, NotManagedError, PatchError, PolicyError
from mkpolicy.jsonvalues import copy_json, create_merge_patch, json_equal
from mkpolicy.policy import FrameworkPolicy, JSONPatchMutation, Mutation
from mkpolicy.policy.model import check_pointer
from mkpolicy.structural import Schema

log = logging.getLogger("mkpolicy.engine")

_MISSING = object()
_FORBIDDEN = frozenset(FORBIDDEN_METADATA)


def _mutations(
    policy: FrameworkPolicy, phase: str, items: list[Mutation], locator: Locator, env: Environment
) -> list[CompiledMutation]:
    out = []
    for i, item in enumerate(items):
        field = "jsonPatch" if item.type == "JSONPatch" else "applyConfiguration"
        ref = item.json_patch if isinstance(item, JSONPatchMutation) else item.apply_configuration
        where = f"policy {policy.name}: {phase} patch #{i + 1} ({item.type})"
        path = ("spec", phase, "patches", i, field, "expression")
        out.append(CompiledMutation(item.type, PolicyExpression(ref.expression, path, where, locator, env)))
    return out


class Adapter:
    """A compiled FrameworkPolicy: ``is_managed``, ``create`` and ``sync``.

    Adapters are immutable after compilation and safe to share between threads; the
    only mutable state is :attr:`ignored_count` (patches skipped under
    ``failurePolicy: Ignore``).
    """

    def __init__(self, policy: FrameworkPolicy, schema: Schema | None = None) -> None:
        self.policy = policy
        spec = policy.spec
        self.gvk = spec.gvk
        self.schema = schema
        self._merge_schema = merge_schema(schema)
        self.params = copy_json(spec.params) if spec.params is not None else None
        self.fail = spec.failure_policy == "Fail"
        self.identifier = spec.creation.workload_identifier
        self.sync_mode = spec.sync.mode
        self.sync_subresource = spec.sync.subresource
        self.ignored_count = 0
        self.managed_by_tokens = check_pointer(spec.managed_by.path) if spec.managed_by is not None else None
        self.managed_by_value = spec.managed_by.value if spec.managed_by is not None else None
        self._api_version, self._kind = self.gvk.api_version, self.gvk.kind
        locator = Locator(policy)
        env = Environment.of(POLICY_VARIABLES)
        self.match_conditions = [
            (
                mc.name,
                PolicyExpression(
                    mc.expression,
                    ("spec", "matchConditions", i, "expression"),
                    f"policy {policy.name}: match condition {mc.name!r}",
                    locator,
                    env,
                ),
            )
            for i, mc in enumerate(spec.match_conditions)
        ]
        self.variables = Variables(
            [
                (
                    v.name,
                    PolicyExpression(
                        v.expression,
                        ("spec", "variables", i, "expression"),
                        f"policy {policy.name}: variable {v.name!r}",
                        locator,
                        env,
                    ),
                )
                for i, v in enumerate(spec.variables)
            ]
        )
        self.creation = _mutations(policy, "creation", spec.creation.patches, locator, env)
        self.sync_patches = _mutations(policy, "sync", spec.sync.patches, locator, env)
        #: ``spec.integration`` compiled (None without one): what ``mkpolicy controller`` runs.
        self.integration = (
            CompiledIntegration(self, spec.integration, locator) if spec.integration is not None else None
        )
        self._uses_now = any(
            isinstance(node, Ident) and node.name == "now" for e in self.expressions() for node in e.ast.walk()
        )

    @property
    def name(self) -> str:
        """The policy's name."""
        return self.policy.name

    def expressions(self) -> list[PolicyExpression]:
        """Every compiled expression: match conditions, variables, creation and sync patches, integration."""
        out = [expression for _, expression in self.match_conditions]
        out += self.variables.by_name.values()
        out += [m.expression for m in self.creation + self.sync_patches]
        return out + (self.integration.expressions() if self.integration is not None else [])

    # -- managed? -----------------------------------------------------------------------
    def is_managed(self, obj: Mapping[str, Any], ctx: Context | None = None) -> tuple[bool, str]:
        """Whether the policy manages ``obj`` (the manager's object), with the reason.

        Errors in match conditions raise with ``failurePolicy: Fail``; with ``Ignore``
        the object counts as not managed and the reason says why.
        """
        ctx = ctx or Context()
        return self._managed(obj, ctx, self._now(ctx))

    def _managed(self, obj: Mapping[str, Any], ctx: Context, now: Timestamp | None) -> tuple[bool, str]:
        if obj.get("apiVersion") != self._api_version or obj.get("kind") != self._kind:
            return False, (
                f"the policy is for {self.gvk} (apiVersion {self._api_version}, kind {self._kind}); "
                f"found apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r}"
            )
        if self.managed_by_tokens is not None:
            found, value = get_pointer(obj, self.managed_by_tokens)
            if not found or value != self.managed_by_value:
                dotted = "." + ".".join(self.managed_by_tokens)
                if found and not isinstance(value, str):
                    return False, f"expected {dotted} to be a string; found {type(value).__name__} {value!r}"
                want, got = json.dumps(self.managed_by_value), json.dumps(value or "")
                return False, f"Expecting {dotted} to be {want} not {got}"
        if self.match_conditions:
            bindings, _ = self._bindings(dict(obj), dict(obj), None, ctx, now)
            for name, expr in self.match_conditions:
                try:
                    result = expr.evaluate(bindings)
                    if type(result) is not bool:
                        raise CelError(
                            f"a match condition must return a bool; found {type(result).__name__}", expr.location()
                        )
                except CelError as exc:
                    if self.fail:
                        raise
                    self._record([exc], None)
                    return False, f"match condition {name!r} failed: {exc}"
                if not result:
                    return False, f"match condition {name!r} is false"
        return True, ""

    def _require_managed(self, obj: Mapping[str, Any], ctx: Context, now: Timestamp | None) -> None:
        # The common case first: the right kind, managed by MultiKueue, no match conditions.
        if obj.get("apiVersion") == self._api_version and obj.get("kind") == self._kind and not self.match_conditions:
            tokens = self.managed_by_tokens
            if tokens is None:
                return
            found, value = get_pointer(obj, tokens)
            if found and type(value) is str and value == self.managed_by_value:
                return
        managed, reason = self._managed(obj, ctx, now)
        if not managed:
            raise NotManagedError(reason, Location(where=f"policy {self.name}"))

    # -- creation -----------------------------------------------------------------------
    def create(
        self, manager_obj: Mapping[str, Any], ctx: Context, ignored: list[MkpolicyError] | None = None
    ) -> dict[str, Any]:
        """The worker copy of ``manager_obj`` (a new dict; the input is not modified).

        Raises :class:`NotManagedError`, or with ``failurePolicy: Fail`` the
        :class:`CelError`/:class:`PatchError` of the first failing patch. With
        ``Ignore`` failing patches are skipped and appended to ``ignored``.
        """
        try:
            return self._create(manager_obj, ctx, ignored)
        except RecursionError:
            raise too_deep(f"policy {self.name}, creation") from None

    def _create(
        self, manager_obj: Mapping[str, Any], ctx: Context, ignored: list[MkpolicyError] | None
    ) -> dict[str, Any]:
        manager = dict(manager_obj)
        now = self._now(ctx)  # one instant per call: match conditions, patches, replays
        self._require_managed(manager, ctx, now)
        mode = ctx.identifier if self.identifier == "context" else self.identifier
        start = clone(manager, ctx.workload_name, ctx.origin, mode)
        if self.managed_by_tokens is not None:
            start = remove_pointer(start, self.managed_by_tokens)
        place = identifier_place(mode, ctx.workload_name)
        # Invariants are checked once, on the result (creation step 4 of docs/architecture.md). Only when
        # that fails are the patches replayed one by one, to name the patch that broke
        # it (and, under failurePolicy Ignore, to skip it).
        skipped: list[MkpolicyError] = []
        worker = self._apply(self.creation, start, manager, None, ctx, now, skipped, None)
        if self._creation_violation(worker, start, ctx, place) is not None:
            skipped = []
            worker = self._apply(
                self.creation,
                start,
                manager,
                None,
                ctx,
                now,
                skipped,
                lambda new, old: self._creation_violation(new, old, ctx, place),
            )
        if skipped or ignored is not None:
            self._record(skipped, ignored)
        return worker

    def _apply(
        self,
        mutations: list[CompiledMutation],
        target: dict[str, Any],
        manager: dict[str, Any],
        worker: dict[str, Any] | None,
        ctx: Context,
        now: Timestamp | None,
        skipped: list[MkpolicyError],
        check: Callable[[Any, dict[str, Any]], str | None] | None,
    ) -> dict[str, Any]:
        """Apply ``mutations`` in order; ``check`` (new, old) names an invariant broken."""
        bindings, scope = self._bindings(target, manager, worker, ctx, now)
        schema = self._merge_schema
        current = target
        for mutation in mutations:
            if target is not current:
                # Patches never modify their input: a new object is a new version.
                bindings["object"] = current = target
                if scope is not None:
                    bindings["variables"] = scope.refresh()
            try:
                new = mutation.apply(target, bindings, schema)
                if check is not None:
                    violation = check(new, target)
                    if violation is not None:
                        raise PatchError(f"the patch breaks an invariant: {violation}", mutation.expression.location())
            except (CelError, PatchError) as exc:
                if self.fail:
                    raise
                skipped.append(exc)
                continue
            target = new
        return target

    def _creation_violation(self, new: Any, before: dict[str, Any], ctx: Context, place: str | None) -> str | None:
        if not isinstance(new, dict):
            return "the object must stay a JSON object"
        for key in ("apiVersion", "kind"):
            if new.get(key, _MISSING) != before.get(key, _MISSING):
                return f"{key} changed from {before.get(key)!r} to {new.get(key)!r}"
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            return "metadata must stay an object"
        old_meta = before["metadata"]
        for key in ("name", "namespace"):
            if meta.get(key, _MISSING) != old_meta.get(key, _MISSING):
                return f"metadata.{key} changed from {old_meta.get(key)!r} to {meta.get(key)!r}"
        labels = meta.get("labels")
        if not isinstance(labels, dict) or labels.get(ORIGIN_LABEL) != ctx.origin:
            return f"the origin label {ORIGIN_LABEL}={ctx.origin!r} was changed or removed"
        if place is not None:
            holder = meta.get(place)
            if not isinstance(holder, dict) or holder.get(PREBUILT_WORKLOAD_KEY) != ctx.workload_name:
                return f"the prebuilt-workload {place[:-1]} {PREBUILT_WORKLOAD_KEY} was changed or removed"
        if not _FORBIDDEN.isdisjoint(meta):  # one test; the loop names the first, in order
            for key in FORBIDDEN_METADATA:
                if key in meta:
                    return f"metadata.{key} must not be set on a worker copy"
        if self.managed_by_tokens is not None and get_pointer(new, self.managed_by_tokens)[0]:
            return f"the managedBy field /{'/'.join(self.managed_by_tokens)} must stay removed"
        if "status" in new:
            return "status must not be set on a worker copy"
        return None

    # -- status write-back ---------------------------------------------------------------
    def sync(
        self,
        manager_obj: Mapping[str, Any],
        worker_obj: Mapping[str, Any],
        ctx: Context,
        ignored: list[MkpolicyError] | None = None,
    ) -> dict[str, Any] | None:
        """The JSON merge patch writing the worker's progress to the manager, or None.

        With ``sync.subresource: status`` the patch only holds ``status`` and is meant
        for the status subresource. None means nothing changed (or the worker has no
        status, or ``sync.mode`` is ``none``).
        """
        try:
            return self._sync(manager_obj, worker_obj, ctx, ignored)
        except RecursionError:
            raise too_deep(f"policy {self.name}, status write-back") from None

    def _sync(
        self,
        manager_obj: Mapping[str, Any],
        worker_obj: Mapping[str, Any],
        ctx: Context,
        ignored: list[MkpolicyError] | None,
    ) -> dict[str, Any] | None:
        manager = dict(manager_obj)
        now = self._now(ctx)  # one instant per call: match conditions and patches
        self._require_managed(manager, ctx, now)
        if self.sync_mode == "none":
            return None
        if not self.sync_patches:
            status = worker_obj.get("status", _MISSING)
            if not isinstance(status, dict):
                return None  # Kueue copies nothing when the worker has no status map
            target = dict(manager)
            target["status"] = status
        else:
            skipped: list[MkpolicyError] = []
            target = self._apply(
                self.sync_patches,
                manager,
                manager,
                dict(worker_obj),
                ctx,
                now,
                skipped,
                lambda new, old: self._sync_violation(new, manager),
            )
            if skipped or ignored is not None:
                self._record(skipped, ignored)
        patch = create_merge_patch(manager, target)
        if not patch:
            return None
        # Patches only put fresh values into the target (CEL results are converted, JSON
        # patch moves copy); without patches the worker's status is shared: copy it.
        return copy_json(patch) if not self.sync_patches else patch

    def _sync_violation(self, new: Any, manager: dict[str, Any]) -> str | None:
        if not isinstance(new, dict):
            return "the object must stay a JSON object"
        if self.sync_subresource == "status":
            # Copy-on-write keeps untouched subtrees identical: compare by identity first.
            if len(new) - ("status" in new) == len(manager) - ("status" in manager):
                for k, v in manager.items():
                    if new.get(k, _MISSING) is not v and k != "status":
                        break
                else:
                    return None  # same keys outside status (as many, all found), same values
            outside = {k: v for k, v in new.items() if k != "status"}
            before = {k: v for k, v in manager.items() if k != "status"}
            changed = create_merge_patch(before, outside)
            if changed:
                return f"sync patches may only write /status; this one writes {', '.join(_paths(changed))}"
            return None
        for key in ("apiVersion", "kind"):
            if not json_equal(new.get(key), manager.get(key)):
                return f"{key} must not change"
        meta, old_meta = new.get("metadata") or {}, manager.get("metadata") or {}
        for key in ("name", "namespace", "uid"):
            if meta.get(key) != old_meta.get(key):
                return f"metadata.{key} must not change"
        return None

    # -- helpers ------------------------------------------------------------------------
    def _now(self, ctx: Context) -> Timestamp | None:
        """The ``now`` CEL sees, read from the clock only when an expression uses it."""
        return Timestamp.from_datetime(ctx.timestamp()) if self._uses_now else None

    def _bindings(
        self,
        target: dict[str, Any],
        manager: dict[str, Any],
        worker: dict[str, Any] | None,
        ctx: Context,
        now: Timestamp | None,
    ) -> tuple[dict[str, Any], VariableScope | None]:
        """The bindings of one call, and the scope of its variables when they must be
        refreshed after ``object`` changes (see :meth:`Variables.bind`)."""
        bindings: dict[str, Any] = {
            "object": target,
            "managerObject": manager,
            "workerObject": worker,
            "workload": dict(ctx.workload) if ctx.workload is not None else None,
            "workloadName": ctx.workload_name,
            "origin": ctx.origin,
            "cluster": ctx.cluster,
            "now": now,
            "params": self.params,
        }
        return bindings, self.variables.bind(bindings)

    def _record(self, skipped: list[MkpolicyError], ignored: list[MkpolicyError] | None) -> None:
        """Count and log patches skipped under ``failurePolicy: Ignore`` (never silently)."""
        for exc in skipped:
            self.ignored_count += 1
            log.warning("failurePolicy Ignore: skipped after error: %s", exc)
        if ignored is not None:
            ignored.extend(skipped)


def _paths(patch: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in patch.items():
        path = f"{prefix}/{key}"
        if isinstance(value, dict) and value:
            out.extend(_paths(value, path))
        else:
            out.append(path)
    return out


def compile(policy: FrameworkPolicy, *, schema: Schema | None = None) -> Adapter:
    """Compile ``policy`` into an :class:`Adapter`; every CEL expression is compiled once.

    The framework schema comes from ``spec.schema`` (relative to the policy file) unless
    ``schema`` is given. Raises :class:`CelError` (syntax, unknown names, wrong result
    shape) or :class:`PolicyError` (schema file), located in the policy file.
    """
    if schema is None and policy.spec.schema_ is not None:
        schema = load_schema(policy)
    return Adapter(policy, schema)


def load_schema(policy: FrameworkPolicy) -> Schema:
    """Load the schema ``spec.schema`` names, relative to the policy's file."""
    ref, path = policy.spec.schema_, policy.schema_file
    assert path is not None
    try:
        return Schema.load(path, policy.spec.gvk.version)
    except PolicyError as exc:
        raise PolicyError(f"spec.schema {ref!r}: {exc.message}", policy.locate(("spec", "schema"))) from None
