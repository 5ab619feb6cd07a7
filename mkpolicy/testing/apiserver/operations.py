"""The verbs (get, list, create, update, patch, delete) with Kubernetes semantics.

This is the server's behaviour with HTTP taken away: :class:`Api` works on a
:class:`~.storage.Store` and raises :class:`~.errors.ApiError`; the HTTP layer only
parses requests and renders results.

Rules kept here: ``uid`` and ``creationTimestamp`` set on create; ``generation`` set
to 1 and bumped when anything outside metadata (and outside status, when status is a
subresource) changes; the global ``resourceVersion`` (no bump and no event for a
no-op write); 409 AlreadyExists and 409 Conflict for a stale ``resourceVersion`` or
``uid``; the ``status`` subresource split; unknown fields pruned (custom resources,
``fieldValidation``); namespaces that must exist and not be terminating.
"""

from __future__ import annotations

import base64
import bisect
import builtins
import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.builtins import strategy_for
from mkpolicy.testing.apiserver.conversion import convert
from mkpolicy.testing.apiserver.crd import resource_type_from_crd
from mkpolicy.testing.apiserver.errors import (
    MODIFIED_WHY,
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    forbidden_value,
    invalid,
    invalid_value,
    not_found,
    unsupported_media_type,
    unsupported_value,
)
from mkpolicy.testing.apiserver.jsonutil import JsonObject, copy_json, json_equal, now_rfc3339, type_name
from mkpolicy.testing.apiserver.lifecycle import Lifecycle
from mkpolicy.testing.apiserver.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    json_patch,
    strategic_merge_patch,
)
from mkpolicy.testing.apiserver.resources import PropagationPolicy, Registry, ResourceType
from mkpolicy.testing.apiserver.schema import normalize, prune_metadata
from mkpolicy.testing.apiserver.selectors import FieldSelector, LabelSelector
from mkpolicy.testing.apiserver.storage import Key, Store, Stored
from mkpolicy.testing.apiserver.validation import (
    check_metadata_types,
    finalizers_added_while_deleting,
    validate_metadata,
)

FieldValidation = Literal["Strict", "Warn", "Ignore"]
_SYSTEM_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Target:
    """What a request is about: a resource at a version, a namespace, maybe a name."""

    rt: ResourceType
    version: str
    namespace: str = ""  # "" for cluster-scoped objects and all-namespaces lists
    name: str = ""
    subresource: str = ""

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` objects are served with."""
        return self.rt.api_version(self.version)

    @property
    def key(self) -> Key:
        """The storage key of the named object."""
        return (self.namespace if self.rt.namespaced else "", self.name)

    @property
    def schema(self) -> Mapping[str, Any] | None:
        """The version's openAPIV3Schema (custom resources)."""
        v = self.rt.version(self.version)
        return v.schema if v is not None else None

    @property
    def status_subresource(self) -> bool:
        """Whether ``status`` is a subresource at this version."""
        v = self.rt.version(self.version)
        return v is not None and v.status_subresource


@dataclass(frozen=True)
class WriteOptions:
    """``dryRun=All`` and ``fieldValidation`` of a write."""

    dry_run: bool = False
    field_validation: FieldValidation = "Warn"


@dataclass
class WriteResult:
    """The object as stored (or as it would be, on a dry run), and ``Warning`` texts."""

    stored: Stored
    created: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ListOptions:
    """The query of a LIST (and the selectors of a WATCH)."""

    label_selector: LabelSelector = field(default_factory=LabelSelector)
    field_selector: FieldSelector = field(default_factory=FieldSelector)
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


@dataclass
class ListResult:
    """One page of a LIST."""

    items: builtins.list[Stored]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass(frozen=True)
class DeleteOptions:
    """The ``DeleteOptions`` of a DELETE (body or query)."""

    propagation: PropagationPolicy | None = None
    dry_run: bool = False
    uid: str | None = None
    resource_version: str | None = None


def encode_continue(rv: int, key: Key) -> str:
    """A continue token: the list's resource version and the last key returned."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [key[0], key[1]]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    """The resource version and last key of a continue token; 400 BadRequest when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        rv, start = data["rv"], data["start"]
        if not isinstance(rv, int) or not (isinstance(start, list) and len(start) == 2):
            raise ValueError("unexpected fields")
        return rv, (str(start[0]), str(start[1]))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise bad_request(
            f"continue key is not valid: expected a token returned by a list, found {token!r} ({exc})"
        ) from None


def parse_rv(value: str, what: str = "resource version") -> int:
    """A resource version as an integer; 400 BadRequest when it is not one."""
    if not value.isdigit():
        raise bad_request(f"invalid {what} {value!r}: expected a non-negative integer")
    return int(value)


class Api:
    """Kubernetes semantics over a store and a registry (one per server)."""

    def __init__(self, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store
        self.lifecycle = Lifecycle(registry, store)

    # -- reads --------------------------------------------------------------------------

    def get(self, t: Target) -> Stored:
        """The named object; 404 NotFound when absent."""
        stored = self.store.get(t.rt.key, t.key)
        if stored is None:
            raise not_found(t.rt.group, t.rt.plural, t.name)
        return stored

    def list(self, t: Target, opts: ListOptions) -> ListResult:
        """One page of the objects selected by ``opts`` in ``t.namespace`` (all when empty)."""
        coll = self.store.collection(t.rt.key)
        if opts.continue_token:
            list_rv, start = decode_continue(opts.continue_token)
            try:
                state = coll.state_at(list_rv)
            except ApiError:
                raise ApiError(
                    410,
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                ) from None
            keys = sorted(state)
        elif opts.resource_version_match == "Exact":
            list_rv = parse_rv(opts.resource_version)
            if list_rv > self.store.rv:
                raise too_large_resource_version(list_rv, self.store.rv)
            state = coll.state_at(list_rv)
            keys = sorted(state)
            start = None
        else:
            if opts.resource_version not in ("", "0"):
                wanted = parse_rv(opts.resource_version)
                if wanted > self.store.rv:
                    raise too_large_resource_version(wanted, self.store.rv)
            state = coll.objects
            keys = coll.sorted_keys()
            list_rv = self.store.rv
            start = None
        lo, hi = 0, len(keys)
        if t.namespace and t.rt.namespaced:
            lo = bisect.bisect_left(keys, (t.namespace, ""))
            hi = bisect.bisect_left(keys, (t.namespace + "\x00", ""))
        if start is not None:
            lo = max(lo, bisect.bisect_right(keys, start))
        name = opts.field_selector.exact("metadata.name")
        items: builtins.list[Stored] = []
        last: Key | None = None
        index = lo
        filtered = not (opts.label_selector.empty and opts.field_selector.empty)
        while index < hi:
            key = keys[index]
            index += 1
            if name is not None and key[1] != name:
                continue
            stored = state[key]
            if filtered and not (
                opts.label_selector.matches(stored.meta.get("labels")) and opts.field_selector.matches(stored.obj)
            ):
                continue
            items.append(stored)
            last = key
            if opts.limit and len(items) >= opts.limit:
                break
        result = ListResult(items, list_rv)
        if opts.limit and last is not None and index < hi and len(items) >= opts.limit:
            result.continue_token = encode_continue(list_rv, last)
            if not filtered:
                result.remaining = hi - index
        return result

    # -- writes -------------------------------------------------------------------------

    def create(self, t: Target, body: Any, opts: WriteOptions = WriteOptions()) -> WriteResult:
        """Create the object in ``body`` (which the call may change)."""
        rt = t.rt
        obj = self._check_body(t, body)
        meta = obj["metadata"]
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != t.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request "
                    f"(object: {meta['namespace']!r}, request: {t.namespace!r})"
                )
            meta["namespace"] = t.namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise bad_request(
                f"resourceVersion should not be set on objects to be created (found {meta['resourceVersion']!r})"
            )
        warnings = self._normalize(t, obj, opts)
        for system_field in (*_SYSTEM_FIELDS, "selfLink", "managedFields"):
            meta.pop(system_field, None)
        if t.status_subresource and not rt.builtin:
            obj.pop("status", None)
        strategy = strategy_for(rt)
        strategy.prepare_create(obj)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(t, meta["generateName"])
        causes = validate_metadata(meta, rt.name_rule, rt.namespaced)
        name = meta.get("name") or ""
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rt.tracks_generation:
            meta["generation"] = 1
        if not causes:
            strategy.complete(obj)
            causes = strategy.validate(obj, None) + _schema_causes(t, obj, None)
            if not causes:
                causes = self._crd_conflicts(rt, obj)
        if causes:
            raise invalid(rt.group, rt.kind, name, causes)
        if rt.namespaced:
            self._check_namespace(t.namespace)
        if self.store.get(rt.key, (meta.get("namespace", ""), name)) is not None:
            raise already_exists(rt.group, rt.plural, name)
        obj["apiVersion"] = rt.stored_api_version
        if opts.dry_run:
            return WriteResult(Stored(obj, self.store.rv), True, warnings)
        stored = self.store.add(rt.key, obj)
        if rt.key == R.CRDS.key:
            self._serve_crd(stored.obj)
        return WriteResult(stored, True, warnings)

    def update(self, t: Target, body: Any, opts: WriteOptions = WriteOptions()) -> WriteResult:
        """Replace the object (PUT) or its status (PUT ``/status``) with ``body``."""
        obj = self._check_body(t, body)
        self._check_identity(t, obj)
        old = self.get(t)
        self._check_preconditions(t, old, obj["metadata"])
        return self._write_update(t, old, obj, opts)

    def patch(self, t: Target, content_type: str, raw: bytes, opts: WriteOptions = WriteOptions()) -> WriteResult:
        """Apply a patch of ``content_type`` to the object (or its status)."""
        rt = t.rt
        accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_MERGE_PATCH] if rt.builtin else [])
        if content_type == APPLY_PATCH:
            raise unsupported_media_type(
                f"{content_type} (server-side apply is not implemented by the loopback server)", accepted
            )
        if content_type not in accepted:
            raise unsupported_media_type(content_type, accepted)
        old = self.get(t)
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_request(f"malformed patch body: {exc}") from None
        # The patch functions never change their input, so they may read the stored object;
        # merge and strategic results share unchanged parts with it and are copied once here.
        current = old.as_version(t.api_version)
        if content_type == MERGE_PATCH:
            if not isinstance(doc, dict):
                raise bad_request(f"merge patch: expected a JSON object, found {type_name(doc)}")
            result = copy_json(apply_merge_patch(current, doc))
        elif content_type == JSON_PATCH:
            result = json_patch(current, doc)  # works on its own copy
        else:
            result = copy_json(strategic_merge_patch(current, doc))
        if not isinstance(result, dict):
            raise bad_request(f"the patched object must be a JSON object, found {type_name(result)}")
        obj = self._check_body(t, result)
        self._check_identity(t, obj)
        self._check_preconditions(t, old, obj["metadata"])
        return self._write_update(t, old, obj, opts)

    def delete(self, t: Target, opts: DeleteOptions = DeleteOptions()) -> tuple[Stored, bool]:
        """Delete the object; returns its resulting state and whether it is gone."""
        old = self.get(t)
        # Checked before the deletion, in the wording of k8s.io/apiserver pkg/registry/rest/delete.go
        # (BeforeDelete: the resource named by its Kind).
        if opts.uid is not None and opts.uid != old.meta.get("uid"):
            raise conflict(
                t.rt.group,
                t.rt.kind,
                t.name,
                f"the UID in the precondition ({opts.uid}) does not match the UID in record "
                f"({old.meta.get('uid')}). The object might have been deleted and then recreated",
            )
        if opts.resource_version is not None and opts.resource_version != old.meta.get("resourceVersion"):
            raise conflict(
                t.rt.group,
                t.rt.kind,
                t.name,
                f"the ResourceVersion in the precondition ({opts.resource_version}) does not match the "
                f"ResourceVersion in record ({old.meta.get('resourceVersion')}). The object might have been modified",
            )
        return self.lifecycle.delete(t.rt, old, opts.propagation or t.rt.default_propagation, dry_run=opts.dry_run)

    def delete_collection(self, t: Target, list_opts: ListOptions, opts: DeleteOptions) -> builtins.list[Stored]:
        """Delete every object a LIST with ``list_opts`` would return; returns their states."""
        out = []
        for stored in self.list(t, ListOptions(list_opts.label_selector, list_opts.field_selector)).items:
            target = Target(t.rt, t.version, stored.key[0], stored.key[1])
            state, _ = self.delete(target, opts)
            out.append(state)
        return out

    # -- helpers ------------------------------------------------------------------------

    def _check_body(self, t: Target, body: Any) -> JsonObject:
        """Type and identity checks every write body passes; returns it with metadata a dict."""
        rt = t.rt
        if not isinstance(body, dict):
            raise bad_request(f"the request body must be a JSON object, found {type_name(body)}")
        if rt.builtin:
            body.setdefault("apiVersion", t.api_version)
            body.setdefault("kind", rt.kind)
        elif not body.get("kind"):
            raise bad_request(f"Object 'Kind' is missing in the request body (expected kind {rt.kind!r})")
        api_version = body.get("apiVersion")
        if api_version != t.api_version:
            raise bad_request(
                f"the API version in the data ({api_version or ''}) does not match the expected API version "
                f"({t.api_version})"
            )
        kind = body.get("kind")
        if kind != rt.kind:
            if rt.builtin:
                raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
            name = (body.get("metadata") or {}).get("name", "") if isinstance(body.get("metadata"), dict) else ""
            raise invalid(rt.group, rt.kind, name, [invalid_value("kind", kind, f"must be {rt.kind}")])
        check_metadata_types(body)
        if body.get("metadata") is None:
            body["metadata"] = {}
        if rt.stored_in is not None:
            # Served from another resource's objects: from here on, the stored form.
            return convert(body, rt.stored_api_version)
        return body

    def _check_identity(self, t: Target, obj: JsonObject) -> None:
        meta = obj["metadata"]
        if meta.get("name", "") != t.name:
            raise bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on the URL ({t.name})"
            )
        if t.rt.namespaced and meta.get("namespace") and meta["namespace"] != t.namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request "
                f"(object: {meta['namespace']!r}, request: {t.namespace!r})"
            )

    def _check_preconditions(self, t: Target, old: Stored, meta: JsonObject) -> None:
        rv = meta.get("resourceVersion")
        if rv and rv != old.meta.get("resourceVersion"):
            raise conflict(t.rt.group, t.rt.plural, t.name, MODIFIED_WHY)
        uid = meta.get("uid")
        if uid and uid != old.meta.get("uid"):
            raise conflict(
                t.rt.group,
                t.rt.plural,
                t.name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old.meta.get('uid')}",
            )

    def _normalize(self, t: Target, obj: JsonObject, opts: WriteOptions) -> builtins.list[str]:
        unknown: builtins.list[str] = []
        if t.rt.builtin:
            prune_metadata(obj, unknown)
        else:
            unknown = normalize(obj, t.schema)
        if not unknown or opts.field_validation == "Ignore":
            return []
        texts = [f'unknown field "{path}"' for path in unknown]
        if opts.field_validation == "Strict":
            # The decoder's error as kube-apiserver wraps it (k8s.io/apiserver handlers/rest.go, transformDecodeError).
            version = t.api_version.rsplit("/", 1)[-1]
            kind = t.rt.kind
            raise bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
                              + ", ".join(texts))  # fmt: skip
        return texts

    def _write_update(self, t: Target, old: Stored, obj: JsonObject, opts: WriteOptions) -> WriteResult:
        rt = t.rt
        warnings = self._normalize(t, obj, opts)
        if t.subresource == "status":
            # A status write changes status and nothing else.
            status = obj.get("status")
            obj = copy_json(old.obj)
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        else:
            meta = obj["metadata"]
            for key in (*_SYSTEM_FIELDS, "namespace"):
                if key in old.meta:
                    meta[key] = old.meta[key]
                else:
                    meta.pop(key, None)
            meta.pop("managedFields", None)
            meta.pop("selfLink", None)
            if t.status_subresource:
                # The main resource cannot change status when status is a subresource.
                if "status" in old.obj:
                    obj["status"] = old.obj["status"]
                else:
                    obj.pop("status", None)
            strategy_for(rt).prepare_update(old.obj, obj)
        meta = obj["metadata"]
        causes: builtins.list[Cause] = validate_metadata(meta, rt.name_rule, rt.namespaced)
        causes += strategy_for(rt).validate(obj, old.obj) + _schema_causes(t, obj, old.obj) if not causes else []
        late = finalizers_added_while_deleting(old.meta, meta)
        if late is not None:
            causes.append(late)
        if causes:
            raise invalid(rt.group, rt.kind, t.name, causes)
        if rt.tracks_generation and _spec_changed(old.obj, obj, t.status_subresource):
            meta["generation"] = int(old.meta.get("generation") or 0) + 1
        obj["apiVersion"] = old.obj.get("apiVersion", rt.stored_api_version)
        meta["resourceVersion"] = old.meta["resourceVersion"]
        if json_equal(obj, old.obj):
            # A no-op write: same resourceVersion, no event (as kube-apiserver does).
            return WriteResult(old, False, warnings)
        if opts.dry_run:
            return WriteResult(Stored(obj, old.rv), False, warnings)
        stored = self.store.replace(rt.key, old, obj)
        if rt.key == R.CRDS.key:
            self._serve_crd(stored.obj)
        if stored.meta.get("deletionTimestamp"):
            self.lifecycle.finish_if_done(rt, stored)
        return WriteResult(stored, False, warnings)

    def _generate_name(self, t: Target, prefix: str) -> str:
        base = prefix[:58]
        for _ in range(64):
            name = base + "".join(random.choice(_NAME_CHARS) for _ in range(5))
            if self.store.get(t.rt.key, (t.namespace if t.rt.namespaced else "", name)) is None:
                return name
        raise ApiError(500, f"Internal error occurred: could not generate a free name from {prefix!r}")

    def _check_namespace(self, namespace: str) -> None:
        ns = self.store.get(R.NAMESPACES.key, ("", namespace))
        if ns is None:
            raise not_found("", "namespaces", namespace)
        if ns.meta.get("deletionTimestamp"):
            err = forbidden(f"unable to create new content in namespace {namespace} because it is being terminated")
            err.details = {"name": namespace, "kind": "namespaces"}
            raise err

    def _crd_conflicts(self, rt: ResourceType, obj: JsonObject) -> builtins.list[Cause]:
        if rt.key != R.CRDS.key:
            return []
        spec = obj["spec"]
        existing = self.registry.get(spec["group"], spec["names"]["plural"])
        if existing is not None and existing.builtin:
            return [
                forbidden_value("spec.names.plural", f"{existing.group_resource} is a built-in resource of this server")
            ]
        if spec.get("conversion", {}).get("strategy") not in (None, "None", "Webhook"):
            return [unsupported_value("spec.conversion.strategy", spec["conversion"]["strategy"], ["None", "Webhook"])]
        return []

    def _serve_crd(self, crd: JsonObject) -> None:
        self.registry.add(resource_type_from_crd(crd))


def _spec_changed(old: JsonObject, new: JsonObject, status_subresource: bool) -> bool:
    skip = ("metadata", "status") if status_subresource else ("metadata",)
    keys = (set(old) | set(new)) - set(skip)
    return any(not json_equal(old.get(k), new.get(k)) for k in keys)


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    """504: a resourceVersion newer than the server's (kube-apiserver's ``Too large resource version``)."""
    return ApiError(
        504,
        f"Too large resource version: {wanted}, current: {current}",
        reason="Timeout",
        details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                 "retryAfterSeconds": 1},
    )  # fmt: skip


def _schema_causes(t: Target, obj: JsonObject, old: JsonObject | None) -> builtins.list[Cause]:
    """A custom resource's violations of its version's schema and rules, as kube-apiserver reports them."""
    if t.rt.builtin or not t.schema:
        return []
    from mkpolicy.engine.admission import schema_errors

    return [Cause(e.cause_type, e.path, e.message) for e in schema_errors(obj, t.schema, old)]
