"""A ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``), checked and matched as
``metav1.LabelSelectorAsSelector`` and ``labels.Selector.Matches`` do
(k8s.io/apimachinery ``pkg/apis/meta/v1/helpers.go``, ``pkg/labels/selector.go``).

Kueue's ``managedJobsNamespaceSelector`` is one; :func:`both` combines two (every requirement of
each), as an admission binding takes a single ``namespaceSelector``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mkpolicy.errors import MkpolicyError

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class LabelSelector:
    """A checked label selector."""

    #: ``(key, operator, values)``; ``matchLabels`` entries are ``In`` with one value.
    requirements: tuple[tuple[str, str, tuple[str, ...]], ...]
    #: The selector as given (what a binding's ``namespaceSelector`` takes).
    source: Mapping[str, Any]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected (an empty selector selects everything)."""
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


def parse(selector: Any, where: str) -> LabelSelector:
    """``selector`` (a ``metav1.LabelSelector`` as a mapping) checked; :class:`MkpolicyError`
    naming ``where`` and what was expected when it is malformed."""
    if not isinstance(selector, Mapping):
        raise MkpolicyError(f"{where}: expected a label selector (matchLabels, matchExpressions); found {selector!r}")
    unknown = sorted(set(selector) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise MkpolicyError(f"{where}: expected matchLabels and matchExpressions only; found {', '.join(unknown)}")
    requirements: list[tuple[str, str, tuple[str, ...]]] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise MkpolicyError(f"{where}.matchLabels: expected a map of label keys to values; found {match_labels!r}")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise MkpolicyError(f"{where}.matchLabels[{key}]: expected a string value; found {value!r}")
        requirements.append((str(key), "In", (value,)))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise MkpolicyError(f"{where}.matchExpressions: expected a list; found {expressions!r}")
    for i, expr in enumerate(expressions):
        at = f"{where}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise MkpolicyError(f"{at}: expected {{key, operator, values}}; found {expr!r}")
        op, values = expr.get("operator"), expr.get("values") or []
        if op not in _OPERATORS:
            raise MkpolicyError(f"{at}.operator: expected one of {', '.join(_OPERATORS)}; found {op!r}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise MkpolicyError(f"{at}.values: expected a list of strings; found {values!r}")
        if op in ("In", "NotIn") and not values:
            raise MkpolicyError(f"{at}.values: expected at least one value for operator {op}; found none")
        if op in ("Exists", "DoesNotExist") and values:
            raise MkpolicyError(f"{at}.values: expected no values for operator {op}; found {values!r}")
        requirements.append((expr["key"], str(op), tuple(values)))
    return LabelSelector(tuple(requirements), dict(selector))


def both(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """One selector with the requirements of both (None: no selector); ``matchLabels`` that
    disagree on a key become two ``In`` expressions (which then select nothing, as both would)."""
    if first is None or second is None:
        chosen = first if second is None else second
        return None if chosen is None else dict(chosen)
    labels = dict(first.get("matchLabels") or {})
    expressions = [dict(e) for e in first.get("matchExpressions") or []]
    for key, value in (second.get("matchLabels") or {}).items():
        if key in labels and labels[key] != value:
            expressions.append({"key": key, "operator": "In", "values": [value]})
        else:
            labels[key] = value
    expressions += [dict(e) for e in second.get("matchExpressions") or [] if dict(e) not in expressions]
    out: dict[str, Any] = {}
    if labels:
        out["matchLabels"] = labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def excluding(namespaces: tuple[str, ...]) -> dict[str, Any]:
    """The selector of every namespace but ``namespaces`` (``kubernetes.io/metadata.name NotIn``)."""
    return {"matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn", "values": list(namespaces)}]}


#: The label kube-apiserver sets on every namespace to its name.
NAME_LABEL = "kubernetes.io/metadata.name"
