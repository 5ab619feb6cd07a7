"""A model of Kueue's MultiKueue, read from Kueue's Go code: the oracle the sidecar is tested against.

- :class:`Kueue` (:mod:`.model`): MultiKueue's controllers on a manager — worker
  connections from MultiKueueCluster Secrets, the workload reconciler, garbage collection —
  sending what Kueue sends (:mod:`.goclient`, :mod:`.adapter`, :mod:`.reconcile`,
  :mod:`.remote`), for a Kueue version (:mod:`.versions`), with kubeconfigs held to
  Kueue's rules (:mod:`.kubeconfig`);
- :class:`ManagerKueue` and :class:`WorkerKueue` (:mod:`.simulate`): what the rest of
  Kueue does (admitting, evicting, finishing workloads), played by the test.

It is written independently of mkpolicy's engine, sidecar and kube client. docs/testing.md
says how to use it.
"""

from __future__ import annotations

from mkpolicy.testing.kueue.adapter import (
    MULTIKUEUE_CONTROLLER,
    ORIGIN_LABEL,
    PREBUILT_WORKLOAD_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    GenericAdapter,
    clone_for_creation,
    merge_patch,
)
from mkpolicy.testing.kueue.goclient import METADATA_ACCEPT, WORKLOAD, ApiStatusError, Gvk, Sent, Wire, go_json
from mkpolicy.testing.kueue.kubeconfig import KubeconfigRefused, RemoteConfig
from mkpolicy.testing.kueue.model import Kueue, Outcome, Settings, parse_framework, secret_for
from mkpolicy.testing.kueue.remote import ConnectionState, retry_after
from mkpolicy.testing.kueue.simulate import ManagerKueue, WorkerKueue, workload_name
from mkpolicy.testing.kueue.versions import DEFAULT_VERSION, PROFILES, KueueVersion

__all__ = [
    "DEFAULT_VERSION",
    "METADATA_ACCEPT",
    "MULTIKUEUE_CONTROLLER",
    "ORIGIN_LABEL",
    "PREBUILT_WORKLOAD_ANNOTATION",
    "PREBUILT_WORKLOAD_LABEL",
    "PROFILES",
    "WORKLOAD",
    "ApiStatusError",
    "ConnectionState",
    "GenericAdapter",
    "Gvk",
    "KubeconfigRefused",
    "Kueue",
    "KueueVersion",
    "ManagerKueue",
    "Outcome",
    "RemoteConfig",
    "Sent",
    "Settings",
    "Wire",
    "WorkerKueue",
    "clone_for_creation",
    "go_json",
    "merge_patch",
    "parse_framework",
    "retry_after",
    "secret_for",
    "workload_name",
]
