"""CustomResourceDefinitions: reading CRD files and turning a CRD into a resource type.

A CRD is served as soon as it is stored (``POST /apis/apiextensions.k8s.io/v1/
customresourcedefinitions`` or :meth:`ApiServer.register_crd`), when its schemas are
structural (:mod:`.structural`, as kube-apiserver requires for v1 CRDs): group, served
versions, plural/singular/kind/shortNames/categories, scope, per-version ``status``
subresource, schema (for pruning and defaulting) and ``selectableFields``.
Conversion webhooks are never called: every version sees the same fields.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location
from mkpolicy.testing.apiserver.errors import (
    Cause,
    invalid,
    invalid_value,
    required_value,
    unsupported_value,
)
from mkpolicy.testing.apiserver.resources import ResourceType, Version
from mkpolicy.testing.apiserver.structural import schema_problems
from mkpolicy.testing.apiserver.validation import dns_label_problems, dns_subdomain_problems

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def crd_problems(crd: Mapping[str, Any]) -> list[Cause]:
    """Everything that keeps ``crd`` from being served (empty when it can be)."""
    causes: list[Cause] = []
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return [required_value("spec")]
    group = _str(spec.get("group"))
    if not group:
        causes.append(required_value("spec.group"))
    else:
        causes.extend(invalid_value("spec.group", group, p) for p in dns_subdomain_problems(group))
        if "." not in group:
            causes.append(invalid_value("spec.group", group, "should be a domain with at least one dot"))
    names = spec.get("names")
    names = names if isinstance(names, Mapping) else {}
    plural, kind = _str(names.get("plural")), _str(names.get("kind"))
    if not plural:
        causes.append(required_value("spec.names.plural"))
    else:
        causes.extend(invalid_value("spec.names.plural", plural, p) for p in dns_label_problems(plural))
    if not kind:
        causes.append(required_value("spec.names.kind"))
    name = _str((crd.get("metadata") or {}).get("name"))
    if plural and group and name != f"{plural}.{group}":
        causes.append(invalid_value("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(unsupported_value("spec.scope", scope, ["Cluster", "Namespaced"]))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(required_value("spec.versions", "must have exactly one version marked as storage version"))
        return causes
    seen: set[str] = set()
    storage = 0
    for i, v in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(v, Mapping):
            causes.append(invalid_value(path, v, "must be an object"))
            continue
        vname = _str(v.get("name"))
        if not vname:
            causes.append(required_value(f"{path}.name"))
        elif vname in seen:
            causes.append(invalid_value(f"{path}.name", vname, "must be unique"))
        else:
            causes.extend(invalid_value(f"{path}.name", vname, p) for p in dns_label_problems(vname))
        seen.add(vname)
        storage += v.get("storage") is True
        schema = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), Mapping) else None
        if not isinstance(schema, Mapping):
            causes.append(required_value(f"{path}.schema.openAPIV3Schema", "schemas are required"))
        else:
            subresources = v.get("subresources")
            status = isinstance(subresources, Mapping) and "status" in subresources
            causes.extend(schema_problems(schema, f"{path}.schema", status=status))
    if spec.get("preserveUnknownFields") is True:
        causes.append(
            invalid_value(
                "spec.preserveUnknownFields",
                True,
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema "
                "instead",
            )
        )
    if storage != 1:
        causes.append(
            invalid_value("spec.versions", storage, "must have exactly one version marked as storage version")
        )
    return causes


def resource_type_from_crd(crd: Mapping[str, Any]) -> ResourceType:
    """The resource type ``crd`` defines; 422 Invalid naming every problem when it is not valid."""
    causes = crd_problems(crd)
    if causes:
        name = _str((crd.get("metadata") or {}).get("name"))
        raise invalid("apiextensions.k8s.io", CRD_KIND, name, causes)
    spec = crd["spec"]
    names = spec["names"]
    versions = []
    storage = ""
    for v in spec["versions"]:
        if v.get("storage") is True:
            storage = v["name"]
        if v.get("served") is False:
            continue
        subresources = v.get("subresources") or {}
        selectable = tuple(
            _str(f.get("jsonPath")).lstrip(".")
            for f in v.get("selectableFields") or []
            if isinstance(f, Mapping) and _str(f.get("jsonPath"))
        )
        versions.append(
            Version(
                name=v["name"],
                status_subresource=isinstance(subresources, Mapping) and "status" in subresources,
                schema=v["schema"]["openAPIV3Schema"],
                selectable_fields=selectable,
            )
        )
    return ResourceType(
        group=spec["group"],
        kind=names["kind"],
        plural=names["plural"],
        singular=_str(names.get("singular")) or names["kind"].lower(),
        namespaced=spec["scope"] == "Namespaced",
        versions=tuple(versions),
        storage_version=storage,
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
    )


def accepted_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The ``status`` kube-apiserver gives a CRD it serves (Established, names accepted)."""
    spec = crd["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    conditions = [
        {
            "type": ctype,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": (crd.get("metadata") or {}).get("creationTimestamp"),
        }
        for ctype, reason, message in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    return {
        "acceptedNames": names,
        "conditions": conditions,
        "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage") is True],
    }


@functools.lru_cache(maxsize=64)
def _parse(path: str, mtime_ns: int, size: int) -> tuple[dict[str, Any], ...]:
    try:
        docs = yamldata.load_file(path)
    except InputError as exc:
        message = exc.message.replace("cannot read file", "cannot read CRD file")
        raise InputError(message, exc.location) from None
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or doc.get("kind") != CRD_KIND or doc.get("apiVersion") != CRD_API_VERSION:
            found = f"{doc.get('apiVersion')}/{doc.get('kind')}" if isinstance(doc, dict) else type(doc).__name__
            raise InputError(
                f"document #{i + 1}: expected an {CRD_API_VERSION} {CRD_KIND}, found {found}", Location(path)
            )
    return tuple(docs)


def load_crds(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The CRDs in a YAML file (several documents allowed); parsed once per process.

    The returned dicts are shared between calls: treat them as read-only.
    Raises :class:`mkpolicy.errors.InputError` for unreadable files and non-CRD documents.
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise InputError(f"cannot read CRD file: {exc.strerror}", Location(p)) from None
    if os.path.isdir(p):
        raise InputError("expected a CRD file, found a directory", Location(p))
    return list(_parse(os.path.abspath(p), st.st_mtime_ns, st.st_size))


#: The CRDs shipped with mkpolicy (see ``mkpolicy/testing/crds/README.md`` for their origin).
BUNDLED = {
    "workloads.kueue.x-k8s.io": "kueue.x-k8s.io_workloads.yaml",
    "multikueueclusters.kueue.x-k8s.io": "kueue.x-k8s.io_multikueueclusters.yaml",
    "multikueueconfigs.kueue.x-k8s.io": "kueue.x-k8s.io_multikueueconfigs.yaml",
    "admissionchecks.kueue.x-k8s.io": "kueue.x-k8s.io_admissionchecks.yaml",
    "clusterqueues.kueue.x-k8s.io": "kueue.x-k8s.io_clusterqueues.yaml",
    "localqueues.kueue.x-k8s.io": "kueue.x-k8s.io_localqueues.yaml",
    "resourceflavors.kueue.x-k8s.io": "kueue.x-k8s.io_resourceflavors.yaml",
    "pipelineruns.tekton.dev": "tekton.dev_pipelineruns.yaml",
}


def bundled_crd_path(name: str) -> Path:
    """The file of a bundled CRD, by CRD name (``workloads.kueue.x-k8s.io``) or file name."""
    file = BUNDLED.get(name, name)
    if file not in BUNDLED.values():
        known = ", ".join(sorted(BUNDLED))
        raise InputError(f"no bundled CRD called {name!r}; expected one of: {known}")
    return Path(str(resources.files("mkpolicy.testing").joinpath("crds", file)))


def bundled_crds(*names: str) -> list[dict[str, Any]]:
    """The bundled CRDs called ``names`` (all of them when none is given)."""
    out: list[dict[str, Any]] = []
    for name in names or tuple(BUNDLED):
        out.extend(load_crds(bundled_crd_path(name)))
    return out
