"""What the built-in kinds do on write, beyond the generic rules (their REST "strategies").

- Namespace: ``status.phase: Active``, ``spec.finalizers: [kubernetes]`` and the
  ``kubernetes.io/metadata.name`` label.
- Secret: ``stringData`` is folded into base64 ``data``; ``type`` defaults to ``Opaque``
  and is immutable; ``immutable: true`` freezes the data.
- ConfigMap: string ``data`` and base64 ``binaryData`` with valid, distinct keys;
  ``immutable: true`` freezes them.
- Job (batch/v1): the defaults kube-apiserver sets (parallelism, completions,
  backoffLimit, completionMode, suspend, podReplacementPolicy), the generated selector
  and pod-template labels, an empty status on create; a template with containers and a
  ``Never``/``OnFailure`` restart policy; selector and completion mode immutable.
- CustomResourceDefinition: a valid CRD (see :mod:`.crd`), an accepted status.
- Event (core/v1 and events.k8s.io/v1, one store): kube-apiserver's checks
  (``pkg/apis/core/validation/events.go``), stricter through events.k8s.io/v1.

What is *not* validated: the pod template beyond the fields above, resource quantities,
and the other Job fields' ranges.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.crd import accepted_status, crd_problems
from mkpolicy.testing.apiserver.errors import (
    Cause,
    bad_request,
    forbidden_value,
    invalid_value,
    required_value,
    too_long,
    unsupported_value,
)
from mkpolicy.testing.apiserver.jsonutil import JsonObject, json_equal
from mkpolicy.testing.apiserver.validation import dns_subdomain_problems, qualified_name_problems

_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
#: The largest ConfigMap or Secret payload kube-apiserver accepts.
DATA_LIMIT = 1024 * 1024


class Strategy:
    """Hooks of one kind; the base class changes nothing and finds nothing wrong."""

    def prepare_create(self, obj: JsonObject) -> None:
        """Normalise a new object before validation (defaults, reset status)."""

    def prepare_update(self, old: JsonObject, new: JsonObject) -> None:
        """Normalise an updated object before validation."""

    def complete(self, obj: JsonObject) -> None:
        """Fill what needs the uid and name (runs after the system fields are set, on create)."""

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        """Problems with ``obj`` (``old`` is the stored object on update)."""
        return []


def _string_map(obj: JsonObject, field: str) -> dict[str, str]:
    value = obj.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise bad_request(f"cannot decode the request body: {field}: expected an object of strings, found {value!r}")
    return value


def _check_base64(field: str, data: dict[str, str]) -> int:
    total = 0
    for key, value in data.items():
        try:
            total += len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise bad_request(
                f"cannot decode the request body: {field}[{key}]: expected base64 data, found {value[:40]!r}"
            ) from None
    return total


def _key_causes(field: str, keys: list[str]) -> list[Cause]:
    causes = []
    for key in keys:
        if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
            causes.append(invalid_value(f"{field}[{key}]", key, _CONFIG_KEY_MESSAGE))
    return causes


def _immutable(old: JsonObject | None, obj: JsonObject, fields: tuple[str, ...]) -> list[Cause]:
    if old is None or old.get("immutable") is not True:
        return []
    causes = [
        forbidden_value(f, "field is immutable when `immutable` is set")
        for f in fields
        if not json_equal(old.get(f), obj.get(f))
    ]
    if obj.get("immutable") is not True:
        causes.append(forbidden_value("immutable", "field is immutable when `immutable` is set"))
    return causes


class NamespaceStrategy(Strategy):
    """Namespaces: Active phase, the ``kubernetes`` finalizer, the name label."""

    def prepare_create(self, obj: JsonObject) -> None:
        obj["status"] = {"phase": "Active"}
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = {}
        if not spec.get("finalizers"):
            spec = {**spec, "finalizers": ["kubernetes"]}
        obj["spec"] = spec

    def complete(self, obj: JsonObject) -> None:
        self._label(obj)

    def prepare_update(self, old: JsonObject, new: JsonObject) -> None:
        self._label(new)

    @staticmethod
    def _label(obj: JsonObject) -> None:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}


class SecretStrategy(Strategy):
    """Secrets: ``stringData`` folded into ``data``, ``type`` defaulted and immutable."""

    def _fold(self, obj: JsonObject) -> None:
        data = dict(_string_map(obj, "data"))
        for key, value in _string_map(obj, "stringData").items():
            data[key] = base64.b64encode(value.encode("utf-8")).decode("ascii")
        obj.pop("stringData", None)
        if data or "data" in obj:
            obj["data"] = data
        if not obj.get("type"):
            obj["type"] = "Opaque"

    def prepare_create(self, obj: JsonObject) -> None:
        self._fold(obj)

    def prepare_update(self, old: JsonObject, new: JsonObject) -> None:
        self._fold(new)

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        data = _string_map(obj, "data")
        causes = _key_causes("data", list(data))
        if _check_base64("data", data) > DATA_LIMIT:
            causes.append(too_long("data", DATA_LIMIT))
        if not isinstance(obj.get("type"), str):
            causes.append(invalid_value("type", obj.get("type"), "must be a string"))
        if old is not None and old.get("type") != obj.get("type"):
            causes.append(invalid_value("type", obj.get("type"), "field is immutable"))
        return causes + _immutable(old, obj, ("data",))


class ConfigMapStrategy(Strategy):
    """ConfigMaps: string ``data`` and base64 ``binaryData`` with distinct, valid keys."""

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        data = _string_map(obj, "data")
        binary = _string_map(obj, "binaryData")
        causes = _key_causes("data", list(data)) + _key_causes("binaryData", list(binary))
        causes.extend(
            invalid_value(f"data[{k}]", k, "duplicate of key present in binaryData") for k in data if k in binary
        )
        size = sum(len(k) + len(v.encode("utf-8")) for k, v in data.items()) + _check_base64("binaryData", binary)
        if size > DATA_LIMIT:
            causes.append(too_long("", DATA_LIMIT))
        return causes + _immutable(old, obj, ("data", "binaryData"))


class JobStrategy(Strategy):
    """batch/v1 Jobs: defaults, generated selector and labels, basic template checks."""

    def prepare_create(self, obj: JsonObject) -> None:
        obj["status"] = {}
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        # Both unset: one pod to completion; parallelism alone: a work queue (no completions).
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        if spec.get("parallelism") is None:
            spec["parallelism"] = 1
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        if spec.get("podFailurePolicy") is None:
            spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")

    def complete(self, obj: JsonObject) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj["metadata"]
        uid, name = meta["uid"], meta["name"]
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = spec.get("template")
        if isinstance(template, dict):
            tmeta = template.setdefault("metadata", {})
            if isinstance(tmeta, dict):
                tmeta["labels"] = {
                    **(tmeta.get("labels") or {}),
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required_value("spec")]
        causes: list[Cause] = []
        template = spec.get("template")
        pod: Any = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(pod, dict):
            causes.append(required_value("spec.template.spec"))
        else:
            containers = pod.get("containers")
            if not isinstance(containers, list) or not containers:
                causes.append(required_value("spec.template.spec.containers"))
            policy = pod.get("restartPolicy")
            if policy not in ("Never", "OnFailure"):
                if policy is None:
                    causes.append(
                        required_value("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"')
                    )
                else:
                    causes.append(unsupported_value("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
        for key in ("parallelism", "completions", "backoffLimit"):
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                causes.append(invalid_value(f"spec.{key}", value, "must be greater than or equal to 0"))
        if old is not None:
            old_spec = old.get("spec")
            if not isinstance(old_spec, dict):
                old_spec = {}
            for key in ("selector", "completionMode"):
                if not json_equal(old_spec.get(key), spec.get(key)):
                    causes.append(invalid_value(f"spec.{key}", spec.get(key), "field is immutable"))
        return causes


class CrdStrategy(Strategy):
    """CustomResourceDefinitions: must be servable; status says they are."""

    def complete(self, obj: JsonObject) -> None:
        if not crd_problems(obj):  # an invalid CRD is rejected by validate(), with its causes
            obj["status"] = accepted_status(obj)

    def prepare_update(self, old: JsonObject, new: JsonObject) -> None:
        if not crd_problems(new):
            new["status"] = accepted_status(new)

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        causes = crd_problems(obj)
        if old is not None and not causes:
            for key in ("group",):
                if old["spec"].get(key) != obj["spec"].get(key):
                    causes.append(invalid_value(f"spec.{key}", obj["spec"].get(key), "field is immutable"))
            if old["spec"]["names"].get("plural") != obj["spec"]["names"].get("plural"):
                causes.append(
                    invalid_value("spec.names.plural", obj["spec"]["names"].get("plural"), "field is immutable")
                )
            if old["spec"].get("scope") != obj["spec"].get("scope"):
                causes.append(invalid_value("spec.scope", obj["spec"].get("scope"), "field is immutable"))
        return causes


def _text(obj: JsonObject, field: str) -> str:
    value = obj.get(field)
    return value if isinstance(value, str) else ""


def _unset(value: Any) -> bool:
    return value in (None, "", 0, {}) or (isinstance(value, dict) and not any(value.values()))


class EventStrategy(Strategy):
    """Events, stored as core v1 Events (``pkg/apis/core/validation/events.go``).

    Every Event passes the legacy checks; one written through events.k8s.io/v1
    (``strict``) also the new API's: ``eventTime``, a ``Normal``/``Warning`` type, none of
    the deprecated fields on create, nothing but the series changed on update.
    """

    _IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                  "type", "eventTime", "action", "related", "reportingComponent", "reportingInstance")  # fmt: skip

    def __init__(self, strict: bool) -> None:
        self.strict = strict

    def validate(self, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        causes = self._legacy(obj)
        if not self.strict:
            return causes
        if old is not None:
            for field in self._IMMUTABLE:
                if not json_equal(old.get(field), obj.get(field)):
                    path = "reportingController" if field == "reportingComponent" else field
                    causes.append(invalid_value(path, obj.get(field), "field is immutable"))
            if not json_equal(old.get("series"), obj.get("series")):
                causes.extend(self._series(obj))
            return causes
        causes.extend(self._series(obj))
        if not obj.get("eventTime"):
            causes.append(required_value("eventTime"))
        if obj.get("type") not in ("Normal", "Warning"):
            causes.append(invalid_value("type", "", f"has invalid value: {_text(obj, 'type')}"))
        for field in ("firstTimestamp", "lastTimestamp", "count", "source"):
            if not _unset(obj.get(field)):
                causes.append(invalid_value(field, "", "needs to be unset"))
        return causes

    @staticmethod
    def _series(obj: JsonObject) -> list[Cause]:
        series = obj.get("series")
        if not isinstance(series, dict):
            return []
        causes = []
        count = series.get("count")
        if not isinstance(count, int) or count < 2:
            causes.append(invalid_value("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(required_value("series.lastObservedTime"))
        return causes

    @staticmethod
    def _legacy(obj: JsonObject) -> list[Cause]:
        causes: list[Cause] = []
        meta = obj.get("metadata")
        namespace = _text(meta, "namespace") if isinstance(meta, dict) else ""
        involved = obj.get("involvedObject")
        involved_ns = _text(involved, "namespace") if isinstance(involved, dict) else ""
        mismatch = invalid_value("involvedObject.namespace", involved_ns, "does not match event.namespace")
        if not obj.get("eventTime"):
            if (not involved_ns and namespace not in ("", "default")) or (involved_ns and involved_ns != namespace):
                causes.append(mismatch)
        else:
            if not involved_ns and namespace not in ("default", "kube-system"):
                causes.append(mismatch)
            controller = _text(obj, "reportingComponent")
            if not controller:
                causes.append(required_value("reportingController"))
            causes.extend(
                invalid_value("reportingController", controller, p) for p in qualified_name_problems(controller)
            )
            for field, path, limit in (("reportingInstance", "reportingInstance", 128), ("action", "action", 128),
                                       ("reason", "reason", 128)):  # fmt: skip
                value = _text(obj, field)
                if not value:
                    causes.append(required_value(path))
                elif len(value) > limit:
                    causes.append(invalid_value(path, "", f"can have at most {limit} characters"))
            if len(_text(obj, "message")) > 1024:
                causes.append(invalid_value("message", "", "can have at most 1024 characters"))
        causes.extend(invalid_value("namespace", namespace, p) for p in dns_subdomain_problems(namespace) if namespace)
        return causes


_DEFAULT = Strategy()
STRATEGIES: dict[tuple[str, str], Strategy] = {
    R.NAMESPACES.served_key: NamespaceStrategy(),
    R.SECRETS.served_key: SecretStrategy(),
    R.CONFIGMAPS.served_key: ConfigMapStrategy(),
    R.EVENTS.served_key: EventStrategy(strict=False),
    R.EVENTS_V1.served_key: EventStrategy(strict=True),
    R.JOBS.served_key: JobStrategy(),
    R.CRDS.served_key: CrdStrategy(),
}


def strategy_for(rt: R.ResourceType) -> Strategy:
    """The hooks of ``rt`` (a no-op strategy for custom resources and Leases)."""
    return STRATEGIES.get(rt.served_key, _DEFAULT) if rt.builtin else _DEFAULT
