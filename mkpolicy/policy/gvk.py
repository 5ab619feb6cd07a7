"""Group/version/kind strings in Kueue's ``Kind.version.group`` notation."""

from __future__ import annotations

import re
from dataclasses import dataclass

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
#: A DNS-1123 subdomain: API groups, and object names of most kinds.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, order=True)
class GVK:
    """A Kubernetes group, version and kind. The core group is ``""``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        """Kueue's notation: ``Kind.version.group`` (``Kind.version`` for the core group)."""
        return f"{self.kind}.{self.version}.{self.group}" if self.group else f"{self.kind}.{self.version}"


def parse_gvk(text: str) -> GVK:
    """Parse ``Kind.version.group`` (``PipelineRun.v1.tekton.dev``, ``Job.v1.batch``).

    The core group is written without a group: ``ConfigMap.v1``. Raises ``ValueError``
    with a message that says what was expected and what was found.
    """
    expected = "expected Kind.version.group, e.g. 'PipelineRun.v1.tekton.dev' or 'Job.v1.batch'"
    if not isinstance(text, str) or not text:
        raise ValueError(f"{expected}; found an empty value")
    parts = text.split(".", 2)
    if len(parts) < 2:
        raise ValueError(f"{expected}; found {text!r} (no version)")
    kind, version = parts[0], parts[1]
    group = parts[2] if len(parts) == 3 else ""
    if not _KIND.match(kind):
        raise ValueError(f"{expected}; found kind {kind!r} in {text!r} (a Kind starts with an upper-case letter)")
    if not _VERSION.match(version):
        raise ValueError(f"{expected}; found version {version!r} in {text!r} (e.g. v1, v1beta1, v2alpha1)")
    if len(parts) == 3 and not DNS_SUBDOMAIN.match(group):
        raise ValueError(f"{expected}; found group {group!r} in {text!r} (a lower-case DNS name)")
    return GVK(group, version, kind)
