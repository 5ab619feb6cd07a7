"""``mkpolicy controller``: Kueue's job reconciler for the kinds whose policy has ``spec.integration``.

:class:`Controller` wires informers (:mod:`.informer`), a work queue (:mod:`.queue`), leader
election (:mod:`.leader`), Events (:mod:`.events`) and metrics (:mod:`.metrics`) around one
:class:`~mkpolicy.controller.reconciler.JobReconciler` per policy (:mod:`.reconciler`, with
:mod:`.equivalence` and :mod:`.status`).
"""

from mkpolicy.controller.app import Controller
from mkpolicy.controller.reconciler import ControllerOptions, JobReconciler

__all__ = ["Controller", "ControllerOptions", "JobReconciler"]
