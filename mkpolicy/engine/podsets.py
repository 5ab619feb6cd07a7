"""A Workload's podSets and the PodSetInfo Kueue injects into a job's pod templates.

Follows Kueue v0.19.2:

- ``apis/kueue/v1beta2/workload_types.go`` (``PodSet``: ``name`` a DNS-1123 label, default
  ``main``; ``count`` >= 0, default 1; ``minCount`` >= 1; ``template`` a PodTemplateSpec whose
  metadata holds only labels and annotations; 1 to 18 podSets with unique names, at most one
  with ``minCount``: the CRD's ``x-kubernetes-validations``);
- ``pkg/podset/podset.go`` (``PodSetInfo``, ``FromPodSet``, ``FromAssignment`` after the
  flavor lookup, ``FromUpdate``, ``Merge`` with its conflict errors, ``RestorePodSpec``);
- ``pkg/util/tolerations`` (``Equal``: tolerations compared field by field).

Values are plain JSON (dicts and lists) as the API server sends them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mkpolicy.jsonvalues import copy_json, json_equal

#: ``MaxPodSets`` in ``apis/kueue/v1beta2/workload_types.go``.
MAX_POD_SETS = 18
#: The default podSet name (``+kubebuilder:default=main``).
DEFAULT_POD_SET_NAME = "main"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TEMPLATE_METADATA = frozenset({"labels", "annotations"})
#: The fields of a PodSetInfo that templates carry (``FromPodSet``).
INFO_FIELDS = ("labels", "annotations", "nodeSelector", "tolerations", "schedulingGates")


class PodSetError(ValueError):
    """podSets that the Workload API refuses; the message says which podSet and why."""


class FlavorNotFound(LookupError):
    """A ResourceFlavor an admission assigns does not exist (the Go lookup's NotFound: retried)."""


class PodSetConflict(ValueError):
    """``ErrInvalidPodSetUpdate``: an admission's info conflicts with the template (permanent)."""


def validate_pod_sets(value: Any) -> list[dict[str, Any]]:
    """``value`` (a podSets expression's result, as JSON) checked against the Workload API's
    podSet schema and defaulted as the API server defaults it (``name: main``, ``count: 1``).

    Raises :class:`PodSetError` naming the first problem.
    """
    if not isinstance(value, list):
        raise PodSetError(f"podSets: expected a list of podSets; found {_kind(value)}")
    if not 1 <= len(value) <= MAX_POD_SETS:
        raise PodSetError(f"podSets: expected 1 to {MAX_POD_SETS} podSets; found {len(value)}")
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    with_min = 0
    for i, item in enumerate(value):
        where = f"podSets[{i}]"
        if not isinstance(item, dict):
            raise PodSetError(f"{where}: expected a map {{name, count, template, minCount?}}; found {_kind(item)}")
        unknown = sorted(set(item) - {"name", "count", "template", "minCount", "topologyRequest"})
        if unknown:
            raise PodSetError(f"{where}: unknown field {unknown[0]!r} (a podSet has name, count, template, minCount)")
        name = item.get("name", DEFAULT_POD_SET_NAME)
        if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.match(name):
            raise PodSetError(f"{where}.name: expected a DNS-1123 label (at most 63 characters); found {name!r}")
        if name in names:
            raise PodSetError(f"{where}.name: duplicate podSet name {name!r}; names must be unique")
        names.add(name)
        count = item.get("count", 1)
        if type(count) is not int or count < 0:
            raise PodSetError(f"{where}.count: expected an integer >= 0; found {count!r}")
        if count > 2**31 - 1:
            raise PodSetError(f"{where}.count: expected at most {2**31 - 1} (int32); found {count}")
        template = item.get("template")
        _check_template(template, where)
        ps: dict[str, Any] = {"name": name, "count": count, "template": copy_json(template)}
        if "minCount" in item and item["minCount"] is not None:
            minimum = item["minCount"]
            if type(minimum) is not int or minimum < 1:
                raise PodSetError(f"{where}.minCount: expected an integer >= 1; found {minimum!r}")
            if minimum > count:
                raise PodSetError(f"{where}.minCount: expected at most count ({count}); found {minimum}")
            with_min += 1
            ps["minCount"] = minimum
        if item.get("topologyRequest") is not None:
            ps["topologyRequest"] = copy_json(item["topologyRequest"])
        out.append(ps)
    if with_min > 1:
        raise PodSetError(f"podSets: at most one podSet can use minCount; found {with_min}")
    return out


def _check_template(template: Any, where: str) -> None:
    if not isinstance(template, dict):
        raise PodSetError(f"{where}.template: expected a PodTemplateSpec (a map); found {_kind(template)}")
    meta = template.get("metadata", {})
    if not isinstance(meta, dict):
        raise PodSetError(f"{where}.template.metadata: expected a map; found {_kind(meta)}")
    extra = sorted(set(meta) - _TEMPLATE_METADATA)
    if extra:
        raise PodSetError(f"{where}.template.metadata: only labels and annotations are allowed; found {extra[0]!r}")
    for key in ("labels", "annotations"):
        _check_string_map(meta.get(key), f"{where}.template.metadata.{key}")
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise PodSetError(f"{where}.template.spec: expected a PodSpec (a map); found {_kind(spec)}")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise PodSetError(f"{where}.template.spec.containers: expected a non-empty list; found {_kind(containers)}")
    for j, container in enumerate(containers):
        if not isinstance(container, dict) or not isinstance(container.get("name"), str) or not container["name"]:
            raise PodSetError(f"{where}.template.spec.containers[{j}]: expected a container with a name")
    _check_string_map(spec.get("nodeSelector"), f"{where}.template.spec.nodeSelector")
    for key in ("tolerations", "schedulingGates"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            raise PodSetError(f"{where}.template.spec.{key}: expected a list of maps; found {_kind(value)}")


def _check_string_map(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise PodSetError(f"{where}: expected a map of strings; found {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the bool {value}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "a map" if isinstance(value, dict) else type(value).__name__


# -- PodSetInfo ---------------------------------------------------------------------------


def empty_info(name: str, count: int) -> dict[str, Any]:
    """A PodSetInfo with nothing to inject."""
    return {
        "name": name,
        "count": count,
        "labels": {},
        "annotations": {},
        "nodeSelector": {},
        "tolerations": [],
        "schedulingGates": [],
    }


def info_from_pod_set(pod_set: Mapping[str, Any]) -> dict[str, Any]:
    """``FromPodSet``: what a podSet's template holds (restore writes these back)."""
    template = pod_set.get("template") or {}
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    info = empty_info(str(pod_set.get("name", DEFAULT_POD_SET_NAME)), int(pod_set.get("count", 1)))
    info["labels"] = dict(meta.get("labels") or {})
    info["annotations"] = dict(meta.get("annotations") or {})
    info["nodeSelector"] = dict(spec.get("nodeSelector") or {})
    info["tolerations"] = copy_json(list(spec.get("tolerations") or []))
    info["schedulingGates"] = copy_json(list(spec.get("schedulingGates") or []))
    return info


def merge_info(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """``PodSetInfo.Merge``: ``other``'s labels, annotations and nodeSelector added to
    ``into`` (a key with another value is a :class:`PodSetConflict`), its tolerations and
    scheduling gates appended unless already there."""
    for field in ("annotations", "labels", "nodeSelector"):
        mine, theirs = into.setdefault(field, {}), other.get(field) or {}
        for key, value in theirs.items():
            if key in mine and mine[key] != value:
                raise PodSetConflict(
                    f"invalid admission check PodSetUpdate: conflict for {field}: "
                    f"conflict for key={key}, value1={mine[key]}, value2={value}"
                )
        mine.update(theirs)
    for field in ("tolerations", "schedulingGates"):
        mine_list = into.setdefault(field, [])
        for item in other.get(field) or []:
            if not any(json_equal(item, have) for have in mine_list):
                mine_list.append(copy_json(item))


def info_from_assignment(
    assignment: Mapping[str, Any], pod_set: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``FromAssignment``: the count admitted and each assigned ResourceFlavor's node labels
    and tolerations (``flavors`` maps a flavor name to its object; a missing one is
    :class:`FlavorNotFound`, as the Go lookup's NotFound)."""
    count = assignment.get("count")
    info = empty_info(str(assignment.get("name")), int(count if count is not None else pod_set.get("count", 1)))
    seen: set[str] = set()
    for name in (assignment.get("flavors") or {}).values():
        if name in seen:
            continue
        flavor = flavors.get(name)
        if flavor is None:
            raise FlavorNotFound(f'resourceflavors.kueue.x-k8s.io "{name}" not found')
        spec = flavor.get("spec") or {}
        info["nodeSelector"].update(spec.get("nodeLabels") or {})
        info["tolerations"].extend(copy_json(list(spec.get("tolerations") or [])))
        seen.add(name)
    return info


def info_from_update(update: Mapping[str, Any]) -> dict[str, Any]:
    """``FromUpdate``: an admission check's podSetUpdate as a PodSetInfo."""
    return {
        "labels": dict(update.get("labels") or {}),
        "annotations": dict(update.get("annotations") or {}),
        "nodeSelector": dict(update.get("nodeSelector") or {}),
        "tolerations": copy_json(list(update.get("tolerations") or [])),
        "schedulingGates": [],
    }


def merged_for_inject(
    pod_sets: Sequence[Mapping[str, Any]], infos: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """What ``inject`` sees as ``podSetsInfo``: each podSet's template values with the
    admission's info merged in (``podset.Merge``, conflicts refused), the admitted count.

    So ``inject`` and ``restore`` write the same fields: restore writes the template's
    values (:func:`info_from_pod_set`), inject these.
    """
    if len(infos) != len(pod_sets):
        raise PodSetConflict(f"invalid podset infos: expecting {len(pod_sets)} podset, got {len(infos)}")
    out = []
    for pod_set, info in zip(pod_sets, infos, strict=True):
        merged = info_from_pod_set(pod_set)
        merged["count"] = int(info.get("count", merged["count"]))
        merge_info(merged, info)
        out.append(merged)
    return out
