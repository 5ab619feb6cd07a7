"""``mkpolicy webhook``: the admission policies of ``mkpolicy export admission`` served as admission
webhooks, for clusters without MutatingAdmissionPolicy (Kubernetes 1.34/1.35 without the beta
gate, managed offerings). The same manifests, the same CEL, evaluated by mkpolicy's engine
(:func:`mkpolicy.engine.admission_policies.run_mutating`, in kube-apiserver's reinvocation).

``POST /mutate`` and ``POST /validate`` take an ``admission.k8s.io/v1`` AdmissionReview for any
kind with a policy; the answer is the review's response: for ``/mutate`` a JSONPatch from the
object as received to the object the MutatingAdmissionPolicies leave (default LocalQueue, then
suspension with the marker, then managedBy), for ``/validate`` a denial listing every failed
validation. The default LocalQueue is read from the cluster (``paramKind: LocalQueue``, name
``default`` in the object's namespace) when a client is given, and so are the namespace's labels
for the bindings' ``namespaceSelector`` (``managedJobsNamespaceSelector``: Kueue's webhook reads
the namespace too, ``namespaceMatchesSelector`` in ``jobframework/utils.go``); without a client a
namespace has only its ``kubernetes.io/metadata.name`` label.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from mkpolicy.engine import Adapter
from mkpolicy.engine.admission_policies import (
    AdmissionOptions,
    admission_manifests,
    evaluate_validating,
    run_mutating,
)
from mkpolicy.errors import MkpolicyError
from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.labelselector import NAME_LABEL, LabelSelector, parse

log = logging.getLogger("mkpolicy.controller.webhook")

REVIEW = "admission.k8s.io/v1"


def json_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``old`` into ``new`` (maps recursively, lists and values whole)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            where = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": where, "value": value})
            elif old[key] != value or type(old[key]) is not type(value):
                ops.extend(json_patch(old[key], value, where))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class AdmissionWebhook:
    """The admission policies of every adapter with ``spec.integration``, by kind."""

    def __init__(
        self, adapters: Sequence[Adapter], options: AdmissionOptions, client: KubeClient | None = None
    ) -> None:
        self.client = client
        self.by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for adapter in adapters:
            if adapter.integration is None:
                continue
            gvk = adapter.gvk
            self.by_kind[(gvk.api_version, gvk.kind)] = admission_manifests(adapter.policy, options)

    def _manifests(self, request: Mapping[str, Any], kind: str) -> list[tuple[dict[str, Any], LabelSelector | None]]:
        """The policies of ``kind`` for the request's kind, each with its binding's namespace selector."""
        gvk = request.get("kind") or {}
        group, version = str(gvk.get("group") or ""), str(gvk.get("version") or "")
        api_version = f"{group}/{version}" if group else version
        manifests = self.by_kind.get((api_version, str(gvk.get("kind"))), [])
        selectors: dict[str, LabelSelector | None] = {}
        for m in manifests:
            if m["kind"] == f"{kind}Binding":
                found = (m["spec"].get("matchResources") or {}).get("namespaceSelector")
                selectors[m["spec"]["policyName"]] = None if found is None else parse(found, m["metadata"]["name"])
        return [(m, selectors.get(m["metadata"]["name"])) for m in manifests if m["kind"] == kind]

    async def _namespace_labels(self, namespace: str) -> dict[str, str]:
        if self.client is None or not namespace:
            return {NAME_LABEL: namespace}
        try:
            found = await self.client.get(f"/api/v1/namespaces/{namespace}")
        except ApiError as exc:
            if exc.status == 404:
                return {NAME_LABEL: namespace}
            raise
        return dict((found.get("metadata") or {}).get("labels") or {})

    async def _bound(self, request: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
        """The policies of ``kind`` whose binding selects the request's namespace."""
        chosen = self._manifests(request, kind)
        if any(selector is not None for _, selector in chosen):
            labels = await self._namespace_labels(str(request.get("namespace") or ""))
            chosen = [(m, s) for m, s in chosen if s is None or s.matches(labels)]
        return [m for m, _ in chosen]

    async def _default_queue(self, namespace: str) -> dict[str, Any] | None:
        if self.client is None or not namespace:
            return None
        try:
            return await self.client.get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/default")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def mutate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The response to a mutating AdmissionReview request."""
        obj = request.get("object") or {}
        operation = str(request.get("operation") or "")
        current: dict[str, Any] = dict(obj)
        params = None
        manifests = await self._bound(request, "MutatingAdmissionPolicy")
        if any("paramKind" in m["spec"] for m in manifests):
            params = await self._default_queue(str(request.get("namespace") or ""))
        current = run_mutating(manifests, current, old=request.get("oldObject"), params=params, operation=operation)
        response: dict[str, Any] = {"uid": request.get("uid"), "allowed": True}
        ops = json_patch(obj, current)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        return response

    async def validate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The response to a validating AdmissionReview request."""
        obj = request.get("object") or {}
        operation = str(request.get("operation") or "")
        denied: list[str] = []
        for manifest in await self._bound(request, "ValidatingAdmissionPolicy"):
            params = None
            if "paramKind" in manifest["spec"]:
                params = await self._default_queue(str(request.get("namespace") or ""))
            denied += evaluate_validating(
                manifest, obj, old=request.get("oldObject"), params=params, operation=operation
            )
        if not denied:
            return {"uid": request.get("uid"), "allowed": True}
        return {
            "uid": request.get("uid"),
            "allowed": False,
            "status": {"code": 422, "reason": "Invalid", "message": "; ".join(denied)},
        }

    def app(self) -> web.Application:
        """``/mutate``, ``/validate`` and ``/healthz``."""

        async def review(request: web.Request) -> web.Response:
            try:
                body = await request.json()
                admission = body["request"]
            except (ValueError, KeyError, TypeError):
                return web.json_response({"error": "expected an admission.k8s.io/v1 AdmissionReview"}, status=400)
            try:
                handler = self.mutate if request.path == "/mutate" else self.validate
                response = await handler(admission)
            except (MkpolicyError, ApiError) as exc:
                log.warning("admission evaluation failed", extra=fields(error=plain_error(exc)))
                response = {"uid": admission.get("uid"), "allowed": False,
                            "status": {"code": 500, "message": f"mkpolicy webhook: {plain_error(exc)}"}}  # fmt: skip
            return web.json_response({"apiVersion": REVIEW, "kind": "AdmissionReview", "response": response})

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        app = web.Application(client_max_size=3 * 1024 * 1024)
        app.router.add_post("/mutate", review)
        app.router.add_post("/validate", review)
        app.router.add_get("/healthz", healthz)
        return app


def server_tls(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The webhook's serving TLS context."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert_file, key_file)
    return ctx
