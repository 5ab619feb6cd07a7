"""What differs between Kueue versions on a worker's wire, read from Kueue's code.

Every fact names the file (in kubernetes-sigs/kueue) and the tags it was read at:

- **Ownership check** — ``jobframework.ValidateRemoteObjectOwnership`` and
  ``DeleteRemoteObjectIfOwned`` (``pkg/controller/jobframework/utils.go``), called from
  ``pkg/controller/admissionchecks/multikueue/workload.go`` and ``multikueuecluster.go``
  (GC): a metadata-only GET before every sync and removal. From v0.17.6, v0.18.2, v0.19.0.
- **Generic clone** — ``cloneUnstructuredForCreation``
  (``pkg/controller/admissionchecks/multikueue/externalframeworks/adapter.go``): the POST
  body holds name, namespace, labels, annotations and spec only. From v0.17.7, v0.18.3,
  v0.19.0; before, the manager's whole object with ``resourceVersion`` cleared (uid,
  ownerReferences, status and all).
- **Read before delete** — ``Adapter.DeleteRemoteObject``: v0.15 GETs the object (JSON)
  and deletes it; from v0.16 the DELETE goes alone.
- **Prebuilt-workload identifier** — ``SetPrebuiltWorkloadName`` / ``PrebuiltWorkloadNameFor``
  (``jobframework/utils.go``) and the ``WorkloadIdentifierAnnotations`` gate
  (``pkg/features/kube_features.go``): v0.15-v0.16 always write the label; v0.17 has the
  gate, off; from v0.18 it is on (the annotation). In label mode a name over 63
  characters goes to the annotation from v0.18.5 and v0.19.1 (before, the label is
  written anyway and the worker refuses it).
- **A remote Workload finished ``OutOfSync``** — ``reconcileGroup`` step 3
  (``pkg/controller/admissionchecks/multikueue/workload.go``, Kueue #13047): from v0.17.8,
  v0.18.4, v0.19.0 the MultiKueue check goes to Retry (re-dispatch) while it is Ready;
  before, the manager's Workload is finished with reason ``OutOfSync`` like any finish
  (read at v0.17.1 and v0.19.2).
- **A zero creationTimestamp** — ``null`` in the bodies Kueue sends before v0.17, left out
  from v0.17 (k8s.io/apimachinery v0.35's ``omitzero``; Kueue 0.17's ``go.mod``).
- **Insecure kubeconfigs** — the ``MultiKueueAllowInsecureKubeconfigs`` gate
  (v0.15-v0.18, off by default; locked off in v0.19) skips the kubeconfig rules.

Unchanged from v0.15 to main (2026-08): the kubeconfig rules, watches (Workloads first,
then every adapter's kind; any failure fails the connection), the reconnect backoff
(5 s doubling to 320 s), the workload reconciler's steps, client-go's 5 QPS / burst 10.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Identifier = Literal["annotation", "label"]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, order=True)
class KueueVersion:
    """A Kueue release (``main`` is the newest), with the behaviours that depend on it."""

    minor: int
    patch: int
    name: str = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> KueueVersion:
        """``"0.19.2"``, ``"v0.18"`` (its last patch release), or ``"main"``."""
        if text == "main":
            return cls(99, 0, "main")
        m = _VERSION.match(text.strip())
        if m is None or m.group(1) != "0":
            known = ", ".join(PROFILES)
            raise ValueError(f"unknown Kueue version {text!r}: expected 0.MINOR[.PATCH] or main (profiles: {known})")
        minor = int(m.group(2))
        if minor < 15:
            raise ValueError(f"Kueue {text}: the generic adapter and its kubeconfig rules are modelled from v0.15")
        patch = int(m.group(3)) if m.group(3) is not None else _LAST_PATCH.get(minor, 0)
        return cls(minor, patch, f"v0.{minor}.{patch}")

    def _since(self, **first: int) -> bool:
        """Whether this release has a change first released in ``0.<minor>.<patch>`` for
        each minor named (``v17=6`` is 0.17.6); later minors all have it."""
        for minor_name, patch in first.items():
            minor = int(minor_name[1:])
            if self.minor == minor:
                return self.patch >= patch
        return self.minor > max(int(m[1:]) for m in first)

    @property
    def ownership_check(self) -> bool:
        """Metadata-only GET before every sync and removal (v0.17.6, v0.18.2, v0.19.0)."""
        return self._since(v17=6, v18=2, v19=0)

    @property
    def generic_clone(self) -> bool:
        """POST body is name, namespace, labels, annotations and spec (v0.17.7, v0.18.3, v0.19.0)."""
        return self._since(v17=7, v18=3, v19=0)

    @property
    def out_of_sync_retry(self) -> bool:
        """A remote finished ``OutOfSync`` resets the check to Retry (v0.17.8, v0.18.4, v0.19.0)."""
        return self._since(v17=8, v18=4, v19=0)

    @property
    def reads_before_delete(self) -> bool:
        """The adapter GETs the object before deleting it (v0.15)."""
        return self.minor == 15

    @property
    def identifier_gate(self) -> bool:
        """The ``WorkloadIdentifierAnnotations`` gate exists (v0.17)."""
        return self.minor >= 17

    @property
    def default_identifier(self) -> Identifier:
        """Where the prebuilt workload name goes by default (annotation from v0.18)."""
        return "annotation" if self.minor >= 18 else "label"

    @property
    def identifier_fallback(self) -> bool:
        """Label mode puts names over 63 characters in the annotation (v0.18.5, v0.19.1)."""
        return self._since(v18=5, v19=1)

    @property
    def omits_zero_timestamp(self) -> bool:
        """Go leaves a zero ``metadata.creationTimestamp`` out of the objects Kueue sends (v0.17: its
        k8s.io/apimachinery v0.35 tags ``ObjectMeta.CreationTimestamp`` ``omitzero``,
        ``pkg/apis/meta/v1/types.go``, which ``encoding/json`` and ``ToUnstructured``,
        ``pkg/runtime/converter.go``, honour); before, it is written as ``null``."""
        return self.minor >= 17

    @property
    def insecure_kubeconfig_gate(self) -> bool:
        """``MultiKueueAllowInsecureKubeconfigs`` can be turned on (v0.15-v0.18)."""
        return self.minor < 19


#: The last patch release of each minor (tags in kubernetes-sigs/kueue, 2026-08).
_LAST_PATCH = {15: 8, 16: 9, 17: 8, 18: 6, 19: 2}

#: Named profiles: one per behaviour set worth testing.
PROFILES: dict[str, KueueVersion] = {
    name: KueueVersion.parse(name) for name in ("0.15", "0.16", "0.17", "0.18", "0.19.2", "main")
}
#: The version modelled unless told otherwise.
DEFAULT_VERSION = "0.19.2"
