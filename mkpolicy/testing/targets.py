"""Cluster targets for the end-to-end tests: the loopback API server, or real clusters (docs/testing.md).

By default every end-to-end test runs against :class:`~mkpolicy.testing.apiserver.ApiServer`
instances started in the test process. When kubeconfigs are given in the environment, the
same tests run against real clusters instead::

    MKPOLICY_E2E_MANAGER_KUBECONFIG=~/.kube/config  MKPOLICY_E2E_MANAGER_CONTEXT=kind-manager
    MKPOLICY_E2E_WORKER1_KUBECONFIG=~/.kube/config  MKPOLICY_E2E_WORKER1_CONTEXT=kind-worker1
    MKPOLICY_E2E_WORKER2_KUBECONFIG=~/.kube/config  MKPOLICY_E2E_WORKER2_CONTEXT=kind-worker2
    MKPOLICY_E2E_ALLOWED_CONTEXTS='kind-*'          # required: the contexts the suite may use

A test then gets a :class:`RealCluster` where it used to get an ``ApiServer``: the same
direct object API (``create``, ``get``, ``list``, ``update``, ``patch``, ``delete``,
``resource_version``), ``kubeconfig()``, ``write_kubeconfig()`` and ``api_client()``, over
HTTP, bound to one namespace created for the test (the same name on every cluster) and
deleted after it. Writes through those clients are refused outside that namespace
(:class:`UnsafeRequestError`): the suite never changes anything it did not create. The
one exception is opt-in: ``MKPOLICY_E2E_INSTALL_CRDS=1`` installs the bundled CRDs the
tests need where a cluster lacks them.

What only the loopback server can do (fault injection, compaction, direct storage access,
its own tokens and CA) raises :class:`LoopbackOnlyError` on a real cluster; tests that
need it carry ``@pytest.mark.loopback_only("why")`` and are skipped there.

This module does not import pytest; :mod:`mkpolicy.testing.fixtures` turns its errors into
pytest outcomes. Everything here is synchronous (``urllib3``), so the direct API can be
called from inside a running event loop, as the loopback server's can.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import fnmatch
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, runtime_checkable
from urllib.parse import quote, urlencode, urlsplit

from mkpolicy.errors import Location, MkpolicyError

if TYPE_CHECKING:
    import ssl

    import urllib3

    from mkpolicy.kube.rest import RestConfig
    from mkpolicy.testing.apiserver import ApiError

#: The cluster roles of a MultiKueue setup, in the order they are reported.
ROLES = ("manager", "worker1", "worker2")
ENV_PREFIX = "MKPOLICY_E2E_"
ENV_ALLOWED = "MKPOLICY_E2E_ALLOWED_CONTEXTS"
ENV_INSTALL_CRDS = "MKPOLICY_E2E_INSTALL_CRDS"
ENV_NAMESPACE_PREFIX = "MKPOLICY_E2E_NAMESPACE_PREFIX"
ENV_KEEP_NAMESPACES = "MKPOLICY_E2E_KEEP_NAMESPACES"
DEFAULT_NAMESPACE_PREFIX = "mkpolicy-e2e"
#: Label on every namespace the suite creates (``kubectl delete ns -l mkpolicy.io/e2e`` cleans up).
NAMESPACE_LABEL = "mkpolicy.io/e2e"
#: Annotation naming the test a namespace was created for.
TEST_ANNOTATION = "mkpolicy.io/e2e-test"


def kubeconfig_var(role: str) -> str:
    """``MKPOLICY_E2E_<ROLE>_KUBECONFIG``."""
    return f"{ENV_PREFIX}{role.upper()}_KUBECONFIG"


def context_var(role: str) -> str:
    """``MKPOLICY_E2E_<ROLE>_CONTEXT``."""
    return f"{ENV_PREFIX}{role.upper()}_CONTEXT"


#: Every variable this module reads; any other ``MKPOLICY_E2E_*`` variable is a typo.
KNOWN_VARIABLES = (
    *(f(r) for r in ROLES for f in (kubeconfig_var, context_var)),
    ENV_ALLOWED,
    ENV_INSTALL_CRDS,
    ENV_NAMESPACE_PREFIX,
    ENV_KEEP_NAMESPACES,
)


@dataclass(frozen=True)
class RequiredResource:
    """A resource the real-cluster tests need on every cluster, and the bundled CRD that serves it."""

    group: str
    version: str
    plural: str
    status: bool = True

    @property
    def crd_name(self) -> str:
        """``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"


#: What the tests that run on real clusters use: Tekton's PipelineRun (v1, status subresource).
REQUIRED_RESOURCES = (RequiredResource("tekton.dev", "v1", "pipelineruns"),)


class TargetError(MkpolicyError):
    """The real-cluster configuration cannot be used: bad variables, an unreadable or refused
    kubeconfig, a context that is not allowed, an unreachable API, missing CRDs."""


class UnsafeRequestError(MkpolicyError):
    """A test tried to write outside the namespaces created for it on a real cluster."""


class LoopbackOnlyError(MkpolicyError):
    """A test used something only the loopback API server has (faults, compaction, storage...)."""


@runtime_checkable
class ClusterTarget(Protocol):
    """What the end-to-end tests use of a cluster; :class:`ApiServer` and :class:`RealCluster` both fit."""

    name: str

    @property
    def url(self) -> str:
        """The API server's URL."""

    def kubeconfig(self, *, cluster: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """A self-contained kubeconfig (CA and credentials as data)."""

    def write_kubeconfig(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        """Write :meth:`kubeconfig` to ``path`` (mode 0600)."""

    def api_client(self) -> Any:
        """A configured ``kubernetes.client.ApiClient``."""

    def create(self, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create ``obj``; returns the stored object."""

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The stored object."""

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, *, label_selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The objects of a kind."""

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch an object."""

    def update(self, obj: Mapping[str, Any], *, subresource: str = "") -> dict[str, Any]:
        """Replace an object (or its ``subresource``)."""

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """Delete an object; its state while finalizers hold it, None once it is gone."""


def is_real(target: object) -> bool:
    """Whether ``target`` is a real cluster (not the loopback server)."""
    return isinstance(target, RealCluster)


# -- configuration from the environment ------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster as the environment names it (not yet contacted)."""

    role: str
    kubeconfig_path: str
    context: str
    server: str
    #: The selected context only, with every file reference inlined (see :func:`flatten_kubeconfig`).
    kubeconfig_json: str = field(repr=False)

    @property
    def kubeconfig(self) -> dict[str, Any]:
        """A fresh copy of the flattened kubeconfig."""
        data: dict[str, Any] = json.loads(self.kubeconfig_json)
        return data


@dataclass(frozen=True)
class TargetConfig:
    """The real clusters the environment selects; ``None`` from :meth:`from_env` means loopback."""

    clusters: tuple[ClusterSpec, ...]
    allowed_contexts: tuple[str, ...]
    install_crds: bool = False
    namespace_prefix: str = DEFAULT_NAMESPACE_PREFIX
    keep_namespaces: bool = False

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles given (``manager``, and ``worker1`` + ``worker2`` when workers are given)."""
        return tuple(c.role for c in self.clusters)

    def cluster(self, role: str) -> ClusterSpec:
        """The cluster of ``role`` (KeyError when not given)."""
        for spec in self.clusters:
            if spec.role == role:
                return spec
        raise KeyError(role)

    def describe(self) -> str:
        """One line per cluster: role, context and server."""
        return "; ".join(f"{c.role}={c.context} ({c.server})" for c in self.clusters)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TargetConfig | None:
        """Parse ``MKPOLICY_E2E_*``; ``None`` when no cluster is given (the loopback server).

        Raises :class:`TargetError` naming the variable for anything inconsistent: unknown
        variables, a worker without the manager or one worker without the other, a
        kubeconfig that cannot be read or flattened or that breaks Kueue's MultiKueue
        rules, a context that does not exist or is not in ``MKPOLICY_E2E_ALLOWED_CONTEXTS``.
        Only local files are read; no cluster is contacted.
        """
        env = os.environ if environ is None else environ
        ours = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}
        unknown = sorted(set(ours) - set(KNOWN_VARIABLES))
        if unknown:
            raise TargetError(
                f"unknown variable {', '.join(unknown)} (known: {', '.join(KNOWN_VARIABLES)})",
                Location(where="environment"),
            )
        given = {r for r in ROLES if ours.get(kubeconfig_var(r))}
        for role in ROLES:
            if ours.get(context_var(role)) and role not in given:
                raise TargetError(f"{context_var(role)} is set but {kubeconfig_var(role)} is not",
                                  Location(where="environment"))  # fmt: skip
        if not given:
            return None
        if "manager" not in given:
            raise TargetError(
                f"{', '.join(kubeconfig_var(r) for r in sorted(given))} set without {kubeconfig_var('manager')}",
                Location(where="environment"),
            )
        if ("worker1" in given) != ("worker2" in given):
            raise TargetError(
                f"give both workers or neither: {kubeconfig_var('worker1')} and {kubeconfig_var('worker2')}",
                Location(where="environment"),
            )
        allowed = tuple(p.strip() for p in ours.get(ENV_ALLOWED, "").split(",") if p.strip())
        if not allowed:
            raise TargetError(
                f"{kubeconfig_var('manager')} is set, so the end-to-end tests would create and delete namespaces on "
                f"real clusters; name the contexts that may be used in {ENV_ALLOWED} (comma-separated names or "
                f"patterns, e.g. {ENV_ALLOWED}='kind-*')",
                Location(where="environment"),
            )
        prefix = ours.get(ENV_NAMESPACE_PREFIX, DEFAULT_NAMESPACE_PREFIX)
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", prefix):
            raise TargetError(
                f"{ENV_NAMESPACE_PREFIX}={prefix!r}: expected a DNS-1123 label of at most 40 characters "
                "starting with a letter (a random suffix is added per test)",
                Location(where="environment"),
            )
        clusters = tuple(
            _cluster_spec(role, os.path.expanduser(ours[kubeconfig_var(role)]), ours.get(context_var(role)) or None,
                          allowed)
            for role in ROLES if role in given
        )  # fmt: skip
        return cls(
            clusters=clusters,
            allowed_contexts=allowed,
            install_crds=_flag(ours, ENV_INSTALL_CRDS),
            namespace_prefix=prefix,
            keep_namespaces=_flag(ours, ENV_KEEP_NAMESPACES),
        )


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise TargetError(f"{name}={env[name]!r}: expected 1/true/yes or 0/false/no", Location(where="environment"))


def _cluster_spec(role: str, path: str, context: str | None, allowed: Sequence[str]) -> ClusterSpec:
    from mkpolicy.kube.kubeconfig import KubeconfigError, kueue_violations, load_kubeconfig

    var = kubeconfig_var(role)
    try:
        raw = load_kubeconfig(path)
    except KubeconfigError as exc:
        raise TargetError(f"{var}: {exc.message}", exc.location) from None
    name = context or raw.get("current-context")
    if not name:
        raise TargetError(f"{var}: {path} has no current-context; set {context_var(role)}", Location(path))
    if not any(fnmatch.fnmatchcase(str(name), pattern) for pattern in allowed):
        raise TargetError(
            f"{var}: context {name!r} is not allowed by {ENV_ALLOWED}={','.join(allowed)!r}; the end-to-end tests "
            "create and delete namespaces on every cluster they are given, so each context must be allowed explicitly",
            Location(path),
        )
    try:
        flat = flatten_kubeconfig(raw, str(name), base_dir=os.path.dirname(os.path.abspath(path)), source=path)
    except TargetError as exc:
        raise TargetError(f"{var}: {exc.message}", exc.location) from None
    problems = kueue_violations(flat)
    if problems:
        raise TargetError(
            f"{var}: context {name!r} breaks Kueue's MultiKueue kubeconfig rules, which the sidecar applies to it: "
            + "; ".join(problems),
            Location(path),
        )
    server = str(flat["clusters"][0]["cluster"]["server"]).rstrip("/")
    return ClusterSpec(role, path, str(name), server, json.dumps(flat))


def flatten_kubeconfig(
    config: Mapping[str, Any], context: str, *, base_dir: str | None = None, source: str = "<kubeconfig>"
) -> dict[str, Any]:
    """The kubeconfig of ``context`` alone, with file references inlined (``kubectl config view --minify --flatten``).

    CA, client certificate and key files become ``*-data``, a token file becomes ``token``.
    Exec and auth-provider plugins and basic auth are refused (:class:`TargetError`): the
    sidecar and mkpolicy's client cannot use them, and Kueue refuses them.
    """

    def named(section: str, item: str, wanted: str, what: str) -> dict[str, Any]:
        for entry in config.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == wanted and isinstance(entry.get(item), dict):
                return dict(entry[item])
        raise TargetError(f"{what} {wanted!r} is not defined", Location(source))

    def read(path: str, what: str) -> bytes:
        full = path if os.path.isabs(path) or base_dir is None else os.path.join(base_dir, path)
        try:
            return Path(full).read_bytes()
        except OSError as exc:
            raise TargetError(f"cannot read the {what} {full!r}: {exc.strerror or exc}", Location(source)) from None

    ctx = named("contexts", "context", context, "context")
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    cluster = named("clusters", "cluster", cluster_name, f"context {context!r} names cluster")
    user = named("users", "user", user_name, f"context {context!r} names user") if user_name else {}
    for key, what in (("exec", "exec credential plugins"), ("auth-provider", "auth-provider plugins")):
        if user.get(key):
            raise TargetError(
                f"context {context!r}: {what} are not supported (use a token or a client certificate, e.g. a "
                "service-account token or kind's admin kubeconfig)",
                Location(source),
            )
    if user.get("username") or user.get("password"):
        raise TargetError(f"context {context!r}: basic auth is not supported", Location(source))
    if cluster.get("certificate-authority") and not cluster.get("certificate-authority-data"):
        pem = read(str(cluster.pop("certificate-authority")), "CA certificate")
        cluster["certificate-authority-data"] = base64.b64encode(pem).decode("ascii")
    cluster.pop("certificate-authority", None)
    for key, what in (("client-certificate", "client certificate"), ("client-key", "client key")):
        if user.get(key) and not user.get(f"{key}-data"):
            user[f"{key}-data"] = base64.b64encode(read(str(user[key]), what)).decode("ascii")
        user.pop(key, None)
    if user.get("tokenFile") and not user.get("token"):
        user["token"] = read(str(user["tokenFile"]), "token file").decode("utf-8", "replace").strip()
    user.pop("tokenFile", None)
    new_ctx: dict[str, Any] = {"cluster": context, "user": context}
    if ctx.get("namespace"):
        new_ctx["namespace"] = ctx["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": new_ctx}],
        "current-context": context,
    }


# -- HTTP -------------------------------------------------------------------------------------------------


def namespace_of(path: str) -> str | None:
    """The namespace a REST path is inside, or None for cluster-scoped paths.

    ``/api/v1/namespaces/<ns>[/...]`` and ``/apis/<g>/<v>/namespaces/<ns>[/...]``
    (the namespace object itself counts as inside it).
    """
    parts = [p for p in urlsplit(path).path.split("/") if p]
    start = 2 if parts[:1] == ["api"] else 3 if parts[:1] == ["apis"] else None
    if start is None or len(parts) <= start + 1 or parts[start] != "namespaces":
        return None
    return parts[start + 1]


class _Http:
    """A small synchronous JSON client for one API server (urllib3, TLS from the kubeconfig)."""

    def __init__(self, rest: RestConfig, timeout: float = 30.0) -> None:
        import urllib3

        from mkpolicy.kube.rest import TokenSource

        self.rest = rest
        self._tokens = TokenSource(rest)
        self._timeout = timeout
        self._ssl: ssl.SSLContext | None = rest.ssl_context()
        options: dict[str, Any] = {"retries": False, "maxsize": 8}
        if self._ssl is not None:  # (insecure-skip-tls-verify never gets here: Kueue's rules refuse it)
            options["ssl_context"] = self._ssl
            if rest.tls_server_name:
                options["server_hostname"] = rest.tls_server_name
        self.pool: urllib3.PoolManager = urllib3.PoolManager(**options)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context (CA, client certificate)."""
        return self._ssl

    def headers(self) -> dict[str, str]:
        """Authentication headers (a bearer token, when the kubeconfig has one)."""
        return self._tokens.headers()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """Send one request; the decoded JSON body, or :class:`ApiError` from the ``Status``."""
        import urllib3

        url = self.rest.server + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": "mkpolicy-e2e", **self.headers()}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        resp = self.pool.request(
            method, url, body=data, headers=headers, timeout=urllib3.Timeout(connect=10, read=timeout or self._timeout)
        )
        if resp.status >= 400:
            raise _api_error(resp.status, resp.data, f"{method} {path}")
        return json.loads(resp.data) if resp.data else None

    def close(self) -> None:
        """Close the connection pool."""
        self.pool.clear()


def _api_error(code: int, raw: bytes, what: str) -> ApiError:
    from mkpolicy.testing.apiserver import ApiError

    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError(code, str(body.get("message") or ""), reason=str(body.get("reason") or ""),
                        details=body.get("details") or {})  # fmt: skip
    text = raw[:200].decode("utf-8", "replace").strip()
    return ApiError(code, f"{what}: {text or '(no body)'}")


@dataclass(frozen=True)
class _Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str = "", subresource: str = "") -> str:
        from mkpolicy.kube.rest import resource_path

        ns = namespace if self.namespaced else None
        return resource_path(self.group, self.version, self.plural, ns, name or None, subresource or None)


# -- one real cluster -------------------------------------------------------------------------------------


class Connection:
    """One real cluster, validated (:func:`connect`); shared by every test of the process.

    It writes nothing itself except the test namespaces (:meth:`create_namespace`,
    :meth:`delete_namespace`) and, when allowed, the bundled CRDs.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        from mkpolicy.kube.kubeconfig import KubeconfigError, rest_config
        from mkpolicy.kube.rest import RestConfigError

        self.spec = spec
        try:
            self.rest = rest_config(spec.kubeconfig, spec.kubeconfig_path, kueue_rules=True)
            self.http = _Http(self.rest)
        except (KubeconfigError, RestConfigError) as exc:
            raise TargetError(f"{kubeconfig_var(spec.role)}: {exc.message}", Location(spec.kubeconfig_path)) from None
        self._resources: dict[tuple[str, str], dict[str, _Resource]] = {}
        self._lock = threading.Lock()
        self._created: set[str] = set()

    @property
    def role(self) -> str:
        """``manager``, ``worker1`` or ``worker2``."""
        return self.spec.role

    def describe(self) -> str:
        """``<role> (context <context>, <server>)``."""
        return f"{self.role} (context {self.spec.context}, {self.spec.server})"

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def resource(self, api_version: str, kind: str) -> _Resource:
        """The resource serving ``kind`` in ``api_version`` (discovery, cached); ApiError 404 when none."""
        from mkpolicy.testing.apiserver import ApiError
        from mkpolicy.testing.apiserver.resources import split_api_version

        group, version = split_api_version(api_version)
        with self._lock:
            known = self._resources.get((group, version))
        if known is None or kind not in known:
            doc = self.http.request("GET", f"/apis/{group}/{version}" if group else f"/api/{version}")
            known = {}
            for res in doc.get("resources") or []:
                name = str(res.get("name") or "")
                if "/" not in name and res.get("kind"):
                    known[str(res["kind"])] = _Resource(group, version, str(res["kind"]), name,
                                                        bool(res.get("namespaced")))  # fmt: skip
            with self._lock:
                self._resources[group, version] = known
        if kind not in known:
            raise ApiError(404, f"the server has no resource of kind {kind} in {api_version}", reason="NotFound")
        return known[kind]

    def serves(self, required: RequiredResource) -> bool:
        """Whether discovery lists ``required`` (and its status subresource when it needs one)."""
        from mkpolicy.testing.apiserver import ApiError

        try:
            doc = self.http.request("GET", f"/apis/{required.group}/{required.version}")
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        names = {str(r.get("name")) for r in doc.get("resources") or []}
        return required.plural in names and (not required.status or f"{required.plural}/status" in names)

    def install_crd(self, required: RequiredResource, timeout: float = 60.0) -> None:
        """Create the bundled CRD for ``required`` and wait until it is served (an existing one is never replaced).

        A conversion webhook the CRD declares (Tekton's) is dropped: there is no webhook
        to call, and the tests use the storage version only.
        """
        from mkpolicy.testing.apiserver import ApiError, bundled_crd_path
        from mkpolicy.testing.apiserver.crd import load_crds

        crds = [c for c in load_crds(bundled_crd_path(required.crd_name))
                if (c.get("metadata") or {}).get("name") == required.crd_name]  # fmt: skip
        crd = json.loads(json.dumps(crds[0]))
        crd["spec"].pop("conversion", None)
        try:
            self.http.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        except ApiError as exc:
            if exc.code == 409:
                raise TargetError(
                    f"{self.describe()}: CRD {required.crd_name} exists but does not serve {required.group}/"
                    f"{required.version} {required.plural} with a status subresource; it is left alone"
                ) from None
            raise TargetError(f"{self.describe()}: cannot install CRD {required.crd_name}: {exc}") from None
        deadline = time.monotonic() + timeout
        while not self.serves(required):
            if time.monotonic() > deadline:
                raise TargetError(f"{self.describe()}: CRD {required.crd_name} installed but not served "
                                  f"after {timeout:.0f}s")  # fmt: skip
            time.sleep(0.5)

    def identity(self) -> str:
        """Something that tells clusters apart: the uid of namespace ``default`` (else the server URL)."""
        from mkpolicy.testing.apiserver import ApiError

        try:
            ns = self.http.request("GET", "/api/v1/namespaces/default")
        except ApiError:
            return self.spec.server
        return str((ns.get("metadata") or {}).get("uid") or self.spec.server)

    def create_namespace(self, name: str, test: str = "") -> None:
        """Create the test namespace ``name`` (labelled, annotated with the test's id)."""
        meta: dict[str, Any] = {"name": name, "labels": {NAMESPACE_LABEL: "true"}}
        if test:
            meta["annotations"] = {TEST_ANNOTATION: test}
        try:
            self.http.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                                  "metadata": meta})  # fmt: skip
        except MkpolicyError as exc:
            raise TargetError(f"{self.describe()}: cannot create the test namespace {name}: {exc}") from None
        self._created.add(name)

    def delete_namespace(self, name: str) -> None:
        """Delete the test namespace ``name``: its :data:`REQUIRED_RESOURCES` objects at once, the rest with it.

        A namespace terminates in the background, within seconds; the PipelineRuns go first
        so that the cluster-wide watches of the next test (the sidecar's manager cache,
        Kueue's worker watch) do not see them disappear.
        """
        from mkpolicy.testing.apiserver import ApiError

        if name not in self._created:
            raise UnsafeRequestError(f"refusing to delete namespace {name!r}: {self.describe()} did not create it")
        background = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        ns = quote(name, safe="")
        paths = [f"/apis/{r.group}/{r.version}/namespaces/{ns}/{r.plural}" for r in REQUIRED_RESOURCES]
        for path in [*paths, f"/api/v1/namespaces/{ns}"]:
            try:
                self.http.request("DELETE", path, body=background)
            except ApiError as exc:
                if exc.code != 404:
                    raise TargetError(f"{self.describe()}: cannot delete the test namespace {name}: {exc}") from None
        self._created.discard(name)


def new_namespace_name(prefix: str = DEFAULT_NAMESPACE_PREFIX) -> str:
    """``<prefix>-<8 random hex digits>``: unique per test, so namespaces still terminating never collide."""
    return f"{prefix}-{secrets.token_hex(4)}"


def connect(config: TargetConfig, roles: Sequence[str] | None = None) -> dict[str, Connection]:
    """Connect to and validate the clusters of ``roles`` (default: all given).

    Checks, each failure a :class:`TargetError` that says what to do: the API answers
    (``/version``) and accepts the credentials (``/api``); no two roles are the same
    cluster; every :data:`REQUIRED_RESOURCES` is served — installed from the bundled CRDs
    first when ``install_crds`` allows it.
    """
    from mkpolicy.testing.apiserver import ApiError

    wanted = list(roles) if roles is not None else list(config.roles)
    conns: dict[str, Connection] = {}
    try:
        for role in wanted:
            conn = Connection(config.cluster(role))
            conns[role] = conn
            for path in ("/version", "/api"):
                try:
                    conn.http.request("GET", path, timeout=15)
                except ApiError as exc:
                    if exc.code in (401, 403):
                        raise TargetError(f"cannot authenticate to {conn.describe()}: {exc.code} {exc.message} "
                                          "(check the credentials of the context)") from None  # fmt: skip
                    raise TargetError(f"{conn.describe()} answered GET {path} with {exc.code} {exc.message}") from None
                except Exception as exc:  # urllib3 / ssl / socket errors
                    raise TargetError(f"cannot reach {conn.describe()}: {_reason(exc)}") from None
        seen: dict[str, str] = {}
        for role, conn in conns.items():
            ident = conn.identity()
            if ident in seen:
                raise TargetError(
                    f"{role} and {seen[ident]} are the same cluster ({conn.spec.server}); MultiKueue needs "
                    "a manager and workers that are separate clusters"
                )
            seen[ident] = role
        missing: list[str] = []
        for required in REQUIRED_RESOURCES:
            for conn in conns.values():
                if conn.serves(required):
                    continue
                if config.install_crds:
                    conn.install_crd(required)
                else:
                    status = " with a status subresource" if required.status else ""
                    missing.append(
                        f"{conn.describe()} serves no {required.group}/{required.version} {required.plural}{status}"
                    )
        if missing:
            raise TargetError(
                "; ".join(missing)
                + f". Install the CRDs (e.g. Tekton's), or set {ENV_INSTALL_CRDS}=1 to install the bundled ones "
                "from mkpolicy/testing/crds (the only cluster-scoped objects the suite ever writes)"
            )
    except BaseException:
        for conn in conns.values():
            conn.close()
        raise
    return conns


def _reason(exc: BaseException) -> str:
    inner: BaseException | None = getattr(exc, "reason", None) if not isinstance(exc, OSError) else exc
    return str(inner if isinstance(inner, BaseException) else exc) or type(exc).__name__


_CONNECTED: dict[TargetConfig, dict[str, Connection]] = {}
_CONNECT_LOCK = threading.Lock()


def connections(config: TargetConfig) -> dict[str, Connection]:
    """:func:`connect` to every cluster of ``config``, once per process."""
    with _CONNECT_LOCK:
        if config not in _CONNECTED:
            _CONNECTED[config] = connect(config)
        return _CONNECTED[config]


@contextlib.contextmanager
def real_clusters(config: TargetConfig, roles: Sequence[str], *, test: str = "") -> Iterator[dict[str, RealCluster]]:
    """One new namespace, the same name on every cluster of ``roles``; :class:`RealCluster` views
    bound to it; the namespace deleted afterwards (kept with ``MKPOLICY_E2E_KEEP_NAMESPACES=1``)."""
    every = connections(config)
    conns = {role: every[role] for role in roles}
    name = new_namespace_name(config.namespace_prefix)
    created: list[Connection] = []
    try:
        for conn in conns.values():
            conn.create_namespace(name, test)
            created.append(conn)
        yield {role: RealCluster(conn, name) for role, conn in conns.items()}
    finally:
        if not config.keep_namespaces:
            errors: list[TargetError] = []
            for conn in created:
                try:
                    conn.delete_namespace(name)
                except TargetError as exc:
                    errors.append(exc)
            if errors:
                raise errors[0]


# -- the view a test gets ---------------------------------------------------------------------------------


class RealCluster:
    """A real cluster as a test sees it: the loopback server's direct API, confined to the test namespace.

    ``namespace`` is the namespace created for the test; :attr:`namespaces` every namespace
    the test may write in. Reads go anywhere; writes elsewhere raise
    :class:`UnsafeRequestError` before they are sent, from the direct API, from
    :meth:`api_client` and from anything calling :meth:`check_write`.
    """

    def __init__(self, connection: Connection, namespace: str) -> None:
        self.connection = connection
        self.name = connection.role
        self.namespace = namespace
        self.namespaces = frozenset({namespace})

    def __repr__(self) -> str:
        return f"RealCluster({self.connection.describe()}, namespace={self.namespace!r})"

    # -- address and credentials -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The API server's URL (from the kubeconfig)."""
        return self.connection.spec.server

    @property
    def context(self) -> str:
        """The kubeconfig context in use."""
        return self.connection.spec.context

    def rest_config(self) -> RestConfig:
        """mkpolicy's connection settings for this cluster."""
        return self.connection.rest

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context (the cluster's CA; the client certificate when the kubeconfig has one)."""
        return self.connection.http.ssl_context()

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization`` header when the kubeconfig authenticates with a token (else empty)."""
        return self.connection.http.headers()

    def kubeconfig(self, *, cluster: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """The flattened kubeconfig (one context, data inline), its namespace the test namespace."""
        config = self.connection.spec.kubeconfig
        ctx = config["contexts"][0]["context"]
        ctx["namespace"] = namespace or self.namespace
        if cluster:
            old = config["current-context"]
            for section in ("clusters", "users", "contexts"):
                for entry in config[section]:
                    if entry["name"] == old:
                        entry["name"] = cluster
            ctx["cluster"] = ctx["user"] = config["current-context"] = cluster
        return config

    def write_kubeconfig(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        """Write :meth:`kubeconfig` to ``path`` (mode 0600); returns the path."""
        from mkpolicy.kube.kubeconfig import write_kubeconfig

        write_kubeconfig(os.fspath(path), self.kubeconfig(**kwargs))
        return Path(path)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for this cluster that refuses writes outside the test namespace."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config_from_dict(self.kubeconfig(), client_configuration=configuration)  # type: ignore[no-untyped-call]
        return _guarded_api_client_class()(self, configuration)

    # -- the guard ---------------------------------------------------------------------------------------

    def check_write(self, method: str, path: str) -> None:
        """Raise :class:`UnsafeRequestError` unless ``method path`` reads, or writes inside :attr:`namespaces`."""
        if method.upper() in ("GET", "HEAD", "OPTIONS"):
            return
        ns = namespace_of(path)
        if ns is not None and ns in self.namespaces:
            return
        where = f"namespace {ns!r}" if ns is not None else "cluster-scoped"
        raise UnsafeRequestError(
            f"refused {method.upper()} {urlsplit(path).path} on real cluster {self.connection.describe()}: "
            f"{where}, outside the test namespace {self.namespace!r}. Tests on real clusters write only inside "
            "the namespace created for them; mark a test that needs more @pytest.mark.loopback_only(...)"
        )

    # -- direct object access (HTTP) ---------------------------------------------------------------------

    def _target(self, api_version: str, kind: str, namespace: str | None) -> tuple[_Resource, str | None]:
        res = self.connection.resource(api_version, kind)
        if res.namespaced and not namespace:
            from mkpolicy.testing.apiserver.errors import bad_request

            raise bad_request(f"{kind} is namespaced: a namespace is required")
        return res, namespace if res.namespaced else None

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        self.check_write(method, path)
        return self.connection.http.request(method, path, **kwargs)

    def create(self, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create ``obj`` (its apiVersion/kind pick the resource); returns the stored object."""
        body = dict(obj)  # only read: the request serialises it
        ns = namespace or (body.get("metadata") or {}).get("namespace") or None
        res, ns = self._target(str(body.get("apiVersion", "")), str(body.get("kind", "")), ns)
        return self._typed(res, self._send("POST", res.path(ns), body=body))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object; raises ApiError 404 when absent."""
        res, ns = self._target(api_version, kind, namespace)
        return self._typed(res, self._send("GET", res.path(ns, name)))

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, *, label_selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The objects of a kind (in ``namespace``, or all), optionally label-selected; every page."""
        res = self.connection.resource(api_version, kind)
        params: dict[str, str] = {"limit": "500"}
        if label_selector:
            params["labelSelector"] = label_selector
        items: builtins.list[dict[str, Any]] = []
        while True:
            page = self._send("GET", res.path(namespace), params=params)
            items.extend(self._typed(res, item) for item in page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            params["continue"] = str(token)

    def update(self, obj: Mapping[str, Any], *, subresource: str = "") -> dict[str, Any]:
        """Replace an object (or its status with ``subresource="status"``)."""
        body = dict(obj)  # only read: the request serialises it
        meta = body.get("metadata") or {}
        res, ns = self._target(str(body.get("apiVersion", "")), str(body.get("kind", "")), meta.get("namespace"))
        return self._typed(res, self._send("PUT", res.path(ns, str(meta.get("name", "")), subresource), body=body))

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch an object; ``patch_type`` is ``merge``, ``json`` or ``strategic``."""
        types = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}  # fmt: skip
        if patch_type not in types:
            raise ValueError(f"patch_type must be one of {', '.join(types)}, found {patch_type!r}")
        res, ns = self._target(api_version, kind, namespace)
        out = self._send("PATCH", res.path(ns, name, subresource), body=patch, content_type=types[patch_type])
        return self._typed(res, out)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
    ) -> dict[str, Any] | None:
        """Delete an object; its state while finalizers hold it, None once it is gone (as the loopback API)."""
        res, ns = self._target(api_version, kind, namespace)
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        out = self._send("DELETE", res.path(ns, name), body=body)
        if not isinstance(out, dict) or out.get("kind") == "Status":
            return None
        meta = out.get("metadata") or {}
        return self._typed(res, out) if meta.get("deletionTimestamp") and meta.get("finalizers") else None

    @staticmethod
    def _typed(res: _Resource, obj: Any) -> dict[str, Any]:
        """Objects as the loopback direct API returns them: with ``apiVersion`` and ``kind``."""
        if not isinstance(obj, dict):
            return obj  # type: ignore[no-any-return]
        return {"apiVersion": res.api_version, "kind": res.kind, **obj}

    @property
    def resource_version(self) -> int:
        """The cluster's current resourceVersion (from a LIST). On a live cluster it moves with
        every write anywhere (leases...), so only ordering comparisons make sense."""
        listed = self._send("GET", "/api/v1/namespaces", params={"limit": "1"})
        value = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        if not value.isdigit():
            raise TargetError(f"{self.connection.describe()}: resourceVersion {value!r} is not a number")
        return int(value)

    # -- what only the loopback server has ---------------------------------------------------------------

    def _loopback_only(self, what: str) -> NoReturn:
        raise LoopbackOnlyError(
            f"{what} is a loopback API server feature; {self.connection.describe()} is a real cluster. "
            'Mark the test @pytest.mark.loopback_only("...") so that it is skipped on real clusters'
        )

    @property
    def faults(self) -> Any:
        """Fault injection: loopback only."""
        self._loopback_only("fault injection (.faults)")

    def compact(self) -> int:
        """Compaction on demand: loopback only."""
        self._loopback_only("compact()")

    @property
    def store(self) -> Any:
        """Direct storage access: loopback only."""
        self._loopback_only("direct storage access (.store)")

    @property
    def token(self) -> str:
        """The server's own token: loopback only (use :meth:`auth_headers`)."""
        self._loopback_only("the server's token (.token)")

    @property
    def ca_pem(self) -> bytes:
        """The server's own CA: loopback only (use :meth:`ssl_context`)."""
        self._loopback_only("the server's CA (.ca_pem)")

    def wait_for_watches(self, count: int = 1, **match: Any) -> None:
        """Counting open watches: loopback only."""
        self._loopback_only("wait_for_watches()")

    def watch_count(self, **match: Any) -> int:
        """Counting open watches: loopback only."""
        self._loopback_only("watch_count()")

    def register_crd(self, crd: Any) -> Any:
        """Registering CRDs directly: loopback only (cluster-scoped)."""
        self._loopback_only("register_crd()")


def _guarded_api_client_class() -> type[Any]:
    """A ``kubernetes.client.ApiClient`` whose every HTTP request asks :meth:`RealCluster.check_write` first.

    The check sits on the client's REST layer (``rest_client.request``), which every call
    goes through: typed APIs, ``CustomObjectsApi``, the dynamic client and watches.
    """
    from kubernetes import client

    class GuardedApiClient(client.ApiClient):
        def __init__(self, target: RealCluster, configuration: Any) -> None:
            super().__init__(configuration)
            rest: Any = self.rest_client
            send = rest.request

            def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
                target.check_write(method, url)
                return send(method, url, *args, **kwargs)

            rest.request = request

    return GuardedApiClient
