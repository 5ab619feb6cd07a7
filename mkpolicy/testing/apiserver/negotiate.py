"""Content negotiation: which representation an ``Accept`` header asks for.

kube-apiserver reads ``Accept`` as an ordered list of media ranges
(``k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go``,
``NegotiateMediaTypeOptions``): ranges are sorted by ``q`` (stably), and the first one the
endpoint can serve wins. Parameters ``as``, ``g`` and ``v`` ask for a transformed
representation; an endpoint serves only the transformations it knows
(``handlers/rest.go``, ``transformResponseObject``): ``PartialObjectMetadata`` for a get or
a watch, ``PartialObjectMetadataList`` for a list (``meta.k8s.io/v1`` and ``v1beta1``), and
``APIGroupDiscoveryList`` (``apidiscovery.k8s.io/v2``) at ``/api`` and ``/apis``
(``endpoints/discovery/aggregated/handler.go``). Any other parameter is ignored.

This server encodes JSON only: a range for protobuf, CBOR or YAML, or for a ``Table``, is
skipped (kube-apiserver would answer it; clients list JSON after it, as client-go's
metadata client and kubectl do). When no range can be served the answer is 406.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from mkpolicy.testing.apiserver.errors import not_acceptable

Transform = Literal["", "PartialObjectMetadata", "PartialObjectMetadataList", "APIGroupDiscoveryList"]
Endpoint = Literal["get", "list", "watch", "discovery", "other"]

JSON = "application/json"
META_GROUP = "meta.k8s.io"
META_VERSIONS = ("v1", "v1beta1")
DISCOVERY_GROUP = "apidiscovery.k8s.io"
#: The aggregated discovery version served (kube-apiserver >= 1.33 serves v2 only).
DISCOVERY_VERSION = "v2"
#: The Content-Type of an aggregated discovery document.
AGGREGATED_DISCOVERY = f"{JSON};g={DISCOVERY_GROUP};v={DISCOVERY_VERSION};as=APIGroupDiscoveryList"

_ALLOWED: dict[Endpoint, frozenset[str]] = {
    "get": frozenset({"PartialObjectMetadata"}),
    "watch": frozenset({"PartialObjectMetadata"}),
    "list": frozenset({"PartialObjectMetadataList"}),
    "discovery": frozenset({"APIGroupDiscoveryList"}),
    "other": frozenset(),
}


@dataclass(frozen=True)
class MediaRange:
    """One clause of an ``Accept`` header."""

    type: str
    subtype: str
    params: tuple[tuple[str, str], ...]
    q: float

    def param(self, name: str) -> str:
        """The value of parameter ``name`` ("" when absent)."""
        for key, value in self.params:
            if key == name:
                return value
        return ""


@dataclass(frozen=True)
class Negotiated:
    """What to answer: JSON, possibly transformed (``as``), with its group and version."""

    transform: Transform = ""
    version: str = ""


def parse_accept(header: str) -> list[MediaRange]:
    """The media ranges of ``header``, by decreasing ``q`` (order kept among equals)."""
    ranges: list[MediaRange] = []
    for clause in header.split(","):
        parts = [p.strip() for p in clause.split(";")]
        full = parts[0].lower()
        if not full:
            continue
        mtype, _, subtype = full.partition("/")
        params: list[tuple[str, str]] = []
        q = 1.0
        for part in parts[1:]:
            key, _, value = part.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
                continue
            if key:
                params.append((key, value))
        ranges.append(MediaRange(mtype, subtype or "*", tuple(params), q))
    return sorted((r for r in ranges if r.q > 0), key=lambda r: -r.q)


def negotiate(header: str | None, endpoint: Endpoint) -> Negotiated:
    """The representation to answer ``header`` with at ``endpoint`` (406 when there is none)."""
    if not header or not header.strip():
        return Negotiated()
    for media in parse_accept(header):
        if not _is_json(media):
            continue
        wanted = media.param("as")
        if not wanted:
            return Negotiated()
        if wanted not in _ALLOWED[endpoint]:
            continue
        group, version = media.param("g"), media.param("v")
        if wanted == "APIGroupDiscoveryList":
            if group == DISCOVERY_GROUP and version == DISCOVERY_VERSION:
                return Negotiated("APIGroupDiscoveryList", version)
            continue
        if group == META_GROUP and version in META_VERSIONS:
            return Negotiated(cast(Transform, wanted), version)
    raise not_acceptable(header)


def _is_json(media: MediaRange) -> bool:
    return (media.type, media.subtype) in (("application", "json"), ("application", "*"), ("*", "*"))


#: ``ObjectMeta``'s fields in the order Go encodes them (``k8s.io/apimachinery/pkg/apis/meta/v1/types.go``).
OBJECT_META_FIELDS = (
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
)  # fmt: skip


def partial_object_metadata(meta: Mapping[str, Any], version: str) -> dict[str, Any]:
    """An object as ``PartialObjectMetadata``: its typed ``ObjectMeta`` and nothing else
    (``meta.AsPartialObjectMetadata``; unknown metadata fields are dropped, as decoding into
    ``ObjectMeta`` drops them)."""
    typed = {key: meta[key] for key in OBJECT_META_FIELDS if key in meta}
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{META_GROUP}/{version}", "metadata": typed}
