"""``phase: integration`` cases: what ``mkpolicy controller`` would do with a job, as snapshots.

From the case's object (as the user submits it) the case builds what the controller builds:

- ``workload``: the Workload it creates for the object once the admission policy suspended it
  (``ConstructWorkload``);
- ``injected``: the object started with the case's ``podSetsInfo`` (inject, then resume);
- ``restored``: that object stopped again (the custom stop, or suspend + restore);
- ``finished`` and ``active``: ``Finished()`` and ``IsActive()`` of the object as given.

And it checks two properties on every case: MKP605 (``restored`` is the suspended object
again) and MKP606 (resume never lifts a suspension the user made, and ends the one ``suspend`` made).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mkpolicy.engine import Adapter
from mkpolicy.engine.integration import same_object, with_marker
from mkpolicy.engine.podsets import empty_info
from mkpolicy.engine.workload import PriorityClasses, construct_workload, extract_priority
from mkpolicy.jsonvalues import copy_json
from mkpolicy.lint.suite.model import Case

#: Kueue's podset label, which every admission adds (``constants.PodSetLabel``).
POD_SET_LABEL = "kueue.x-k8s.io/podset"


def default_infos(pod_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PodSetInfo of an admission without flavors or admission checks: the podset label."""
    out = []
    for pod_set in pod_sets:
        info = empty_info(pod_set["name"], pod_set["count"])
        info["labels"][POD_SET_LABEL] = pod_set["name"]
        out.append(info)
    return out


def integration_outcome(adapter: Adapter, case: Case, obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The snapshot of ``obj`` and the MKP605/MKP606 problems found; raises the engine's errors."""
    integration = adapter.integration
    if integration is None:
        raise ValueError(f"policy {adapter.name} has no spec.integration; an integration case needs one")
    problems: list[str] = []
    suspended = integration.suspend(obj)
    pod_sets = integration.pod_sets(suspended)
    values = case.priorityClasses or {}
    classes = PriorityClasses(workload=values, pod={name: {"value": v} for name, v in values.items()})
    labels = (suspended.get("metadata") or {}).get("labels") or {}
    priority = extract_priority(labels, pod_sets, integration.priority_class(suspended), classes)
    workload = construct_workload(suspended, pod_sets, priority=priority)
    infos = case.podSetsInfo if case.podSetsInfo is not None else default_infos(pod_sets)
    injected = integration.start(suspended, infos, workload)
    restored = integration.stop(injected, workload["spec"]["podSets"])
    # A stop that ends the job for good (a custom stop, e.g. Tekton's StoppedRunFinally) restores nothing.
    if integration.is_suspended(restored) and not same_object(restored, suspended):
        problems.append(
            "MKP605 inject-restore-round-trip: the object started and stopped again is not the suspended "
            "object (restore must write back every field inject writes)"
        )
    if not integration.is_suspended(obj):
        if integration.is_suspended(integration.resume(suspended)):
            problems.append("MKP606 resume-lifts-user-suspend: after suspend then resume the object is still suspended")
        users = with_marker(suspended, False)  # suspended the same way, by the user
        if integration.resume(users) != users or not integration.is_suspended(integration.start(users, infos)):
            problems.append("MKP606 resume-lifts-user-suspend: starting lifted a suspension the user made")
    finished = integration.finished(obj)
    value = {  # fresh copies: a YAML snapshot must not alias shared subtrees
        "workload": workload,
        "injected": injected,
        "restored": restored,
        "finished": {"finished": finished.finished, "success": finished.success, "message": finished.message},
        "active": integration.active(obj),
    }
    return copy_json(value), problems
