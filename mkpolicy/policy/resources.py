"""The resource name (plural) of a policy's kind, as the API server serves it."""

from __future__ import annotations

from mkpolicy.policy.model import FrameworkPolicy
from mkpolicy.structural import read_schema_document


def plural(policy: FrameworkPolicy) -> str:
    """The resource name of the policy's kind: the CRD's ``spec.names.plural`` when
    ``spec.schema`` is a CRD of that kind, else Kubernetes' guess from the kind."""
    gvk = policy.spec.gvk
    if policy.spec.schema_:
        try:
            document = read_schema_document(policy.schema_file or "")
        except Exception:  # an unreadable schema is lint's business (MKP107); guess instead
            document = None
        if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
            spec = document.get("spec") or {}
            names = spec.get("names") or {}
            if spec.get("group") == gvk.group and names.get("kind") == gvk.kind and names.get("plural"):
                return str(names["plural"])
    return guess_plural(gvk.kind)


def guess_plural(kind: str) -> str:
    """Kubernetes' fallback for a kind's resource name: lower case, then English plural rules."""
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"
