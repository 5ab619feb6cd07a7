"""The sidecar's configuration file (``kind: SidecarConfig``), validated with pydantic.

Example (every field but ``workers`` has a default)::

    apiVersion: mkpolicy.io/v1alpha1
    kind: SidecarConfig
    origin: multikueue                 # Kueue's multiKueue.origin
    listen:
      address: 127.0.0.1               # the worker endpoints Kueue connects to
      basePort: 7443                   # worker i listens on basePort + i unless it sets port
    ops:
      address: 0.0.0.0                 # /healthz, /readyz, /metrics (plain HTTP)
      port: 7081                       # (Kueue's pod uses 8080/8443, 8081, 8082, 9443)
    manager:
      kubeconfig: null                 # null: the pod's service account (in-cluster)
      namespace: kueue-system          # where Kueue runs and its MultiKueueCluster Secrets live
      reads: direct                    # direct (live, as Kueue reads) | cache (watch cache, may lag)
    kueue:
      configMap: kueue-manager-config  # Kueue's Configuration, read at start and by --check
      deployment: kueue-controller-manager   # its image tag tells Kueue's version
      version: null                    # when the Deployment cannot be read, e.g. "0.19.2"
      workloadIdentifierAnnotations: null    # the feature gate, when Kueue's configuration does not say
    workers:
      - name: worker1                  # the MultiKueueCluster's name
        kubeconfig:
          file: /etc/mkpolicy/workers/worker1.kubeconfig
      - name: worker2
        port: 9500
        kubeconfig:
          secret: {name: worker2-real-kubeconfig, key: kubeconfig}
        wireSecret: worker2-secret     # optional; default: read from the MultiKueueCluster
    state:
      dir: /var/run/mkpolicy           # keeps CA, serving certificate and tokens across restarts
    reload:
      intervalSeconds: 2
    shutdown:
      gracePeriodSeconds: 8            # below Kueue's terminationGracePeriodSeconds (10)
    limits:                            # bounds on clients and answers (see docs/install.md, "Hardening")
      maxConnections: 128              # per worker endpoint
      headSeconds: 10
      maxBodyBytes: 3145728
    wire:
      allow: []                        # request shapes forwarded besides Kueue's (docs/sidecar-config.md)
    logging:
      level: info
      requestLog: null                 # {file: requests.jsonl}: every request's shape, one JSON line each

Unknown fields are errors; errors name the file, line and column.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from mkpolicy.errors import Location, MkpolicyError, PolicyError, did_you_mean
from mkpolicy.policy.gvk import DNS_SUBDOMAIN

API_VERSION = "mkpolicy.io/v1alpha1"
KIND = "SidecarConfig"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


class ConfigError(MkpolicyError):
    """The sidecar configuration is unreadable or invalid.

    ``problems`` lists each one as a terminal line (``file:line:col: error: message``).
    """

    def __init__(self, message: str, location: Location | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message, location)
        self.problems: list[str] = problems if problems is not None else [self.report()]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


def _port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"expected a TCP port between 1 and 65535 (0: any free port); found {value}")
    return value


def _address(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if value != "localhost":
            raise ValueError(f"expected an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1); found {value!r}") from None
    return value


class Listen(_Model):
    """Where the worker endpoints (the ones Kueue connects to) listen."""

    address: str = Field(default="127.0.0.1", description="IP address; loopback keeps them inside the pod.")
    base_port: int = Field(
        default=7443,
        description="Worker i listens on basePort + i unless it sets port (Kueue's pod uses 8080-8082, 8443, 9443).",
    )
    hosts: list[str] = Field(
        default_factory=list, description="Extra host names or IPs for the serving certificate (besides the address)."
    )

    _check_address = field_validator("address")(_address)
    _check_port = field_validator("base_port")(_port)


class Ops(_Model):
    """Where the operations endpoints listen: /healthz, /readyz, /metrics (plain HTTP, no secrets)."""

    address: str = Field(default="0.0.0.0", description="IP address for the probes and Prometheus.")
    port: int = Field(default=7081, description="TCP port (Kueue's pod uses 8080-8082, 8443, 9443).")

    _check_address = field_validator("address")(_address)
    _check_port = field_validator("port")(_port)


class Manager(_Model):
    """The manager cluster: where Kueue runs and the jobs' originals live."""

    kubeconfig: str | None = Field(
        default=None, description="Kubeconfig file; null uses the pod's service account (in-cluster)."
    )
    context: str | None = Field(default=None, description="Context of the kubeconfig (default: its current-context).")
    namespace: str = Field(default="kueue-system", description="Kueue's namespace (MultiKueueCluster Secrets).")
    # direct is the default because Kueue itself reads the manager's object live: the generic
    # adapter (kueue v0.19.2 admissionchecks/multikueue/externalframeworks/adapter.go, SyncJob and
    # IsJobManagedByKueue) Gets it as unstructured.Unstructured through the manager's client
    # (workload.go's w.client, mgr.GetClient() in controllers.go), and controller-runtime reads
    # unstructured objects from the API server, not its informers, unless Cache.Unstructured is
    # set (controller-runtime v0.24.1 pkg/client/client.go shouldBypassCache; pkg/cluster/cluster.go
    # leaves it false), which cmd/kueue/main.go and pkg/config/config.go never do. A cache here
    # would be staler than Kueue; managerread.py keeps the live read cheap.
    reads: Literal["cache", "direct"] = Field(
        default="direct",
        description="direct: read the manager's object on every transformed request, live, as Kueue reads it; "
        "cache: a watch cache of the policy kinds (a direct read on a miss), which may lag behind the manager.",
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ValueError(f"expected a namespace name (DNS-1123 label); found {value!r}")
        return value


class SecretRef(_Model):
    """A key of a Secret in the manager's Kueue namespace."""

    name: str = Field(description="Secret name.")
    key: str = Field(default="kubeconfig", description="Data key holding the kubeconfig.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _subdomain(value, "a Secret name")

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not _SECRET_KEY.match(value):
            raise ValueError(f"expected a Secret data key (letters, digits, '-', '_', '.'); found {value!r}")
        return value


class KubeconfigSource(_Model):
    """The worker's real kubeconfig: a file, or a Secret in the manager cluster (exactly one)."""

    file: str | None = Field(default=None, description="Path of a kubeconfig file.")
    secret: SecretRef | None = Field(default=None, description="A Secret in manager.namespace.")

    @model_validator(mode="after")
    def _exactly_one(self) -> KubeconfigSource:
        if (self.file is None) == (self.secret is None):
            raise ValueError("expected exactly one of 'file' or 'secret'")
        return self


class Worker(_Model):
    """One worker cluster: a MultiKueueCluster and the sidecar endpoint Kueue uses for it."""

    name: str = Field(description="The MultiKueueCluster's name (the 'cluster' CEL variable).")
    kubeconfig: KubeconfigSource = Field(description="The worker's real kubeconfig (held to Kueue's rules).")
    port: int | None = Field(default=None, description="Port of this worker's endpoint (default: basePort + index).")
    wire_secret: str | None = Field(
        default=None,
        description="The MultiKueueCluster's kubeconfig Secret that --wire points at the sidecar "
        "(default: the one the MultiKueueCluster names).",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _subdomain(value, "a MultiKueueCluster name")

    @field_validator("port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        return None if value is None else _port(value)

    @field_validator("wire_secret")
    @classmethod
    def _wire_secret(cls, value: str | None) -> str | None:
        return None if value is None else _subdomain(value, "a Secret name")


class Kueue(_Model):
    """The Kueue the sidecar runs beside: where its configuration is, and what to assume when unreadable."""

    config_map: str = Field(
        default="kueue-manager-config",
        description="ConfigMap in manager.namespace holding Kueue's Configuration "
        "(key controller_manager_config.yaml).",
    )
    deployment: str = Field(
        default="kueue-controller-manager",
        description="Kueue's Deployment in manager.namespace; the image tag of its manager container "
        "is Kueue's version.",
    )
    version: str | None = Field(
        default=None,
        description="Kueue's version (e.g. 0.19.2) when the Deployment cannot be read; null: read it.",
    )
    workload_identifier_annotations: bool | None = Field(
        default=None,
        description="Kueue's WorkloadIdentifierAnnotations feature gate when its configuration does not say; "
        "null: the default of Kueue's version.",
    )

    @field_validator("config_map", "deployment")
    @classmethod
    def _names(cls, value: str) -> str:
        return _subdomain(value, "an object name")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^v?\d+\.\d+(\.\d+)?([-+].*)?$", value):
            raise ValueError(f"expected a Kueue version such as 0.19.2; found {value!r}")
        return value


#: Where the deploy manifests mount the state (an in-memory emptyDir).
DEFAULT_STATE_DIR = "/var/run/mkpolicy"


class State(_Model):
    """Where the generated CA, serving certificate and tokens are kept."""

    dir: str | None = Field(
        default=DEFAULT_STATE_DIR,
        description="Directory (mode 0700) keeping them across restarts; null generates new ones at every start "
        "(Kueue's kubeconfigs then need wiring again).",
    )


class Reload(_Model):
    """Policy hot reload from the policy directory."""

    interval_seconds: float = Field(default=2.0, description="How often the directory is checked; 0 disables.")

    @field_validator("interval_seconds")
    @classmethod
    def _interval(cls, value: float) -> float:
        if value < 0 or value > 3600:
            raise ValueError(f"expected 0 (off) to 3600 seconds; found {value}")
        return value


class Shutdown(_Model):
    """Graceful shutdown on SIGTERM."""

    grace_period_seconds: float = Field(
        default=8.0,
        description="How long in-flight requests may finish; keep it below the pod's terminationGracePeriodSeconds "
        "(Kueue's is 10).",
    )

    @field_validator("grace_period_seconds")
    @classmethod
    def _grace(cls, value: float) -> float:
        if value < 0 or value > 600:
            raise ValueError(f"expected 0 to 600 seconds; found {value}")
        return value


#: Watches per client address beyond twice Kueue's own, when ``limits.maxWatchesPerAddress`` is unset.
WATCH_RESERVE = 4


class Limits(_Model):
    """Bounds on what clients of the worker endpoints (and the workers' answers) may hold.

    The worker endpoints hold every worker's credentials; whatever connects to them is
    bounded before it is authenticated (connections, handshake and head time, head
    size) and after (body size, waiting for a worker connection, rewritten answers).
    """

    max_connections: int = Field(
        default=128,
        description="Client connections open at once per worker endpoint (TLS handshakes included); a new one "
        "beyond them ends the oldest unauthenticated connection, else the authenticated one idle the longest "
        "between requests, and is reset before any TLS work only when every slot holds a request or a watch. "
        "Kueue needs one per watch plus a few for requests.",
    )
    max_connections_per_address: int = Field(
        default=64,
        description="Of maxConnections, how many one client address may hold (a new one beyond them ends that "
        "address's oldest unauthenticated, else longest-idle, connection): a flood from one address leaves room "
        "for the others, and churns itself so that a probe from its own address still gets in. Kueue connects "
        "from 127.0.0.1 with one connection per watch and a few for requests.",
    )
    reserved_connections: int = Field(
        default=32,
        description="Of maxConnections, the slots only authenticated clients (Kueue) hold: unauthenticated "
        "connections (handshakes included) hold the others, and a new one ends the oldest of them when they are "
        "full. At most a quarter of maxConnections.",
    )
    handshake_seconds: float = Field(default=10.0, description="Time a client has to complete the TLS handshake.")
    head_seconds: float = Field(
        default=10.0,
        description="Time a client has to send a whole request head, from its first byte "
        "(for a new connection: from the handshake); the connection is closed after it.",
    )
    idle_seconds: float = Field(
        default=120.0,
        description="Time an idle keep-alive connection is kept (longer than client-go's 90 s, so the client "
        "closes first).",
    )
    max_head_bytes: int = Field(
        default=64 * 1024, description="Largest request head (request line and header fields), in bytes (431 above)."
    )
    max_header_fields: int = Field(default=128, description="Most header fields in a request head (431 above).")
    max_body_bytes: int = Field(
        default=3 * 1024 * 1024,
        description="Largest request body, in bytes (413 above): kube-apiserver's own limit (3 MiB).",
    )
    worker_wait_seconds: float = Field(
        default=10.0,
        description="Time a request may wait for a connection to its worker when all are busy (503 after it).",
    )
    max_worker_connections: int = Field(
        default=256, description="Connections to one worker at most (watches included); more requests wait."
    )
    watch_idle_seconds: float = Field(
        default=180.0,
        description="A relayed watch on which the worker sends nothing for this long is ended (cleanly, at an "
        "event boundary), and Kueue reconnects: a worker connection that died silently is noticed. Kueue asks "
        "for bookmarks, which kube-apiserver sends about every minute.",
    )
    max_answer_bytes: int = Field(
        default=8 * 1024 * 1024,
        description="Largest worker answer the sidecar reads whole to rewrite (a policy kind's object), "
        "in bytes (502 above); answers passed through are streamed and not bounded.",
    )
    answer_budget_bytes: int = Field(
        default=64 * 1024 * 1024,
        description="Bytes of answers being rewritten at once, over all endpoints; a rewrite that would exceed "
        "it is answered 429 (Retry-After: 1), which client-go retries.",
    )

    worker_answer_budget_bytes: int = Field(
        default=24 * 1024 * 1024,
        description="Bytes of one worker's answers being rewritten at once (429 above): a slow or hostile worker "
        "cannot take the whole answerBudgetBytes from the others. Counted as bytes arrive.",
    )
    max_watches_per_address: int | None = Field(
        default=None,
        description="Watches one client address may hold open on a worker endpoint (429 with Retry-After above, "
        "naming this limit): a client holding the endpoint token cannot fill the endpoint's connection slots with "
        "watches. Unset: twice the kinds Kueue watches on a worker (Workloads and each enabled integration's or "
        "policy's kind, from the wire contract; a reconnect may overlap the watch it replaces) plus "
        f"{WATCH_RESERVE}.",
    )
    answer_seconds: float = Field(
        default=60.0,
        description="Time a worker answer read whole (to be rewritten) has to arrive completely: a dripped body "
        "holds its bytes no longer (503 after it).",
    )

    @field_validator("reserved_connections")
    @classmethod
    def _reserved(cls, value: int) -> int:
        if not 0 <= value <= 100_000:
            raise ValueError(f"expected 0 to 100000; found {value}")
        return value

    def watch_limit(self, kueue_watches: int) -> int:
        """Watches per client address in force, Kueue watching ``kueue_watches`` kinds on the endpoint."""
        if self.max_watches_per_address is not None:
            return self.max_watches_per_address
        return 2 * kueue_watches + WATCH_RESERVE

    @property
    def reserve(self) -> int:
        """The reserved slots in force: ``reservedConnections``, at most a quarter of ``maxConnections``."""
        return min(self.reserved_connections, self.max_connections // 4)

    @field_validator(
        "max_connections",
        "max_header_fields",
        "max_worker_connections",
        "max_connections_per_address",
        "max_watches_per_address",
    )
    @classmethod
    def _count(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 100_000:
            raise ValueError(f"expected 1 to 100000; found {value}")
        return value

    @field_validator(
        "handshake_seconds",
        "head_seconds",
        "idle_seconds",
        "worker_wait_seconds",
        "watch_idle_seconds",
        "answer_seconds",
    )
    @classmethod
    def _seconds(cls, value: float) -> float:
        if not 0 < value <= 3600:
            raise ValueError(f"expected more than 0 and at most 3600 seconds; found {value}")
        return value

    @field_validator(
        "max_head_bytes", "max_body_bytes", "max_answer_bytes", "answer_budget_bytes", "worker_answer_budget_bytes"
    )
    @classmethod
    def _bytes(cls, value: int) -> int:
        if not 1024 <= value <= 1 << 34:
            raise ValueError(f"expected 1024 bytes to 16 GiB; found {value}")
        return value


#: Kubernetes verbs a ``wire.allow`` rule may name.
WIRE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
_MEDIA = re.compile(r"^(\*/\*|[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+*-]+)(;as=[A-Za-z]+)?$")
_PARAM = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class AllowRule(_Model):
    """One request shape the sidecar forwards besides what Kueue sends (widening the wire contract)."""

    reason: str = Field(description="Why this is allowed (shown by --check and in refusals' neighbours' logs).")
    verbs: list[str] = Field(description=f"Kubernetes verbs: {', '.join(WIRE_VERBS)}.")
    group: str = Field(description='API group ("" for the core group).')
    resource: str = Field(description='Resource (plural), or "*" for every resource of the group.')
    subresource: str | None = Field(
        default=None, description='Subresource (e.g. "status"); null: the object or collection itself; "*": any.'
    )
    versions: list[str] | None = Field(default=None, description="API versions; null: any.")
    query: list[str] = Field(
        default_factory=list, description='Query parameters allowed (names), e.g. ["dryRun", "fieldManager"]; "*": any.'
    )
    accept: list[str] = Field(
        default_factory=list,
        description='Accept media types besides what Kueue sends (e.g. "application/json;as=Table"); "*": any.',
    )
    content_types: list[str] = Field(
        default_factory=list,
        description="Request body media types; empty: no body (GET, HEAD and watches never have one).",
    )

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a reason: say why the contract is widened")
        return value

    @field_validator("verbs")
    @classmethod
    def _verbs(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"expected at least one verb ({', '.join(WIRE_VERBS)})")
        for verb in value:
            if verb not in WIRE_VERBS:
                raise ValueError(f"expected one of {', '.join(WIRE_VERBS)}; found {verb!r}")
        return value

    @field_validator("group")
    @classmethod
    def _group(cls, value: str) -> str:
        if value and not DNS_SUBDOMAIN.match(value):
            raise ValueError(f'expected an API group (a DNS subdomain, or "" for core); found {value!r}')
        return value

    @field_validator("resource", "subresource")
    @classmethod
    def _resource(cls, value: str | None) -> str | None:
        if value is not None and value != "*" and not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", value):
            raise ValueError(f'expected a lower-case resource name or "*"; found {value!r}')
        return value

    @field_validator("query")
    @classmethod
    def _query(cls, value: list[str]) -> list[str]:
        for name in value:
            if name != "*" and not _PARAM.match(name):
                raise ValueError(f'expected query parameter names (letters and digits) or "*"; found {name!r}')
        return value

    @field_validator("accept", "content_types")
    @classmethod
    def _media(cls, value: list[str]) -> list[str]:
        for media in value:
            if media != "*" and not _MEDIA.match(media.replace(" ", "")):
                raise ValueError(f'expected media types such as "application/json" or "*"; found {media!r}')
        return value

    @model_validator(mode="after")
    def _bodies(self) -> AllowRule:
        reads = {"get", "list", "watch"}
        if self.content_types and set(self.verbs) <= reads:
            raise ValueError("contentTypes: a GET (get, list, watch) never carries a body; expected none")
        return self


def _get_only() -> list[Literal["GET", "HEAD"]]:
    return ["GET"]


class AllowPath(_Model):
    """A path that is not a resource (e.g. ``/version``) forwarded besides Kueue's discovery."""

    reason: str = Field(description="Why this is allowed.")
    path: str = Field(description='The path, e.g. "/version"; a trailing "*" makes it a prefix.')
    methods: list[Literal["GET", "HEAD"]] = Field(default_factory=_get_only, description="HTTP methods.")

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        return AllowRule._reason(value)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or "?" in value or "%" in value or "//" in value or "/." in value:
            raise ValueError(
                f'expected a plain path starting with "/" (no query, escapes, or dot segments); found {value!r}'
            )
        if value.split("/")[1] in ("api", "apis"):
            raise ValueError(
                f"expected a path outside /api and /apis (resources are widened with wire.allow); found {value!r}"
            )
        return value


class Wire(_Model):
    """The wire contract: what the sidecar forwards to a worker (``mkpolicy sidecar --check`` prints it).

    By default exactly the requests Kueue sends (its Workloads, the kinds of its enabled
    integrations and external frameworks, the policy kinds, discovery); anything else is
    answered 403. ``allow`` widens it, explicitly.
    """

    allow: list[AllowRule] = Field(
        default_factory=list, description="Request shapes forwarded besides Kueue's (each with its reason)."
    )
    allow_paths: list[AllowPath] = Field(
        default_factory=list, description="Paths outside /api and /apis forwarded (e.g. /version for kubectl)."
    )


class RequestLogConfig(_Model):
    """A JSON-lines log of the shape of every request Kueue sends a worker endpoint (off by default).

    One line per request: the worker, method, path, decoded query, ``Accept`` and
    ``Content-Type`` (no other header), the body's keys and value types (no value), the
    answer's code and when it started. Appended to (a restart continues the file).
    """

    file: str = Field(description="Path of the file (appended to).")
    max_entries: int = Field(default=100000, description="Lines logged at most; then logging stops, saying so.")

    @field_validator("max_entries")
    @classmethod
    def _entries(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"expected at least 1; found {value}")
        return value


class Logging(_Model):
    """Structured JSON logs on stderr."""

    level: Literal["debug", "info", "warning", "error"] = Field(default="info", description="Lowest level logged.")
    request_log: RequestLogConfig | None = Field(
        default=None, description="A JSON-lines log of request shapes (for comparing Kueue versions; off: null)."
    )


class SidecarConfig(_Model):
    """Configuration of ``mkpolicy sidecar``."""

    api_version: Literal["mkpolicy.io/v1alpha1"] = Field(default="mkpolicy.io/v1alpha1", description="Always this.")
    kind: Literal["SidecarConfig"] = Field(default="SidecarConfig", description="Always SidecarConfig.")
    origin: str = Field(default="multikueue", description="Kueue's multiKueue.origin (the origin label value).")
    listen: Listen = Field(default_factory=Listen)
    ops: Ops = Field(default_factory=Ops)
    manager: Manager = Field(default_factory=Manager)
    kueue: Kueue = Field(default_factory=Kueue)
    workers: list[Worker] = Field(description="The worker clusters (at least one).")
    state: State = Field(default_factory=State)
    reload: Reload = Field(default_factory=Reload)
    shutdown: Shutdown = Field(default_factory=Shutdown)
    limits: Limits = Field(default_factory=Limits)
    wire: Wire = Field(default_factory=Wire)
    logging: Logging = Field(default_factory=Logging)

    @field_validator("origin")
    @classmethod
    def _origin(cls, value: str) -> str:
        if not value or len(value) > 63 or not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", value):
            raise ValueError(f"expected a label value (at most 63 letters, digits, '-', '_', '.'); found {value!r}")
        return value

    @model_validator(mode="after")
    def _workers(self) -> SidecarConfig:
        if not self.workers:
            raise ValueError("workers: expected at least one worker cluster")
        names: set[str] = set()
        ports: dict[int, str] = {}
        for worker, port in zip(self.workers, self.worker_ports(), strict=True):
            if worker.name in names:
                raise ValueError(f"workers: duplicate worker name {worker.name!r}; expected unique names")
            names.add(worker.name)
            if port > 65535:
                raise ValueError(f"workers: worker {worker.name!r} would listen on port {port}; lower listen.basePort")
            if port and port in ports:
                raise ValueError(f"workers: {worker.name!r} and {ports[port]!r} would both listen on port {port}")
            wildcard = {"0.0.0.0", "::"}
            shared = self.listen.address == self.ops.address or {self.listen.address, self.ops.address} & wildcard
            if port and port == self.ops.port and shared:
                raise ValueError(f"workers: {worker.name!r} would listen on the ops port {port}")
            ports[port] = worker.name
        return self

    def worker_ports(self) -> list[int]:
        """The endpoint port of each worker, in order."""
        base = self.listen.base_port
        return [w.port if w.port is not None else (base + i if base else 0) for i, w in enumerate(self.workers)]


def load_config(path: str) -> SidecarConfig:
    """Read and validate the sidecar configuration file; raises :class:`ConfigError`."""
    from mkpolicy.policy.source import parse_documents, read_text

    try:
        text = read_text(path)
        docs = list(parse_documents(text, path))
    except PolicyError as exc:
        raise ConfigError(exc.message, exc.location) from None
    if len(docs) != 1:
        raise ConfigError(f"expected one YAML document (a SidecarConfig); found {len(docs)}", Location(path))
    doc = docs[0]
    if not isinstance(doc.data, dict):
        raise ConfigError(f"expected a SidecarConfig mapping; found {type(doc.data).__name__}", Location(path))
    try:
        return SidecarConfig.model_validate(doc.data)
    except ValidationError as exc:
        problems = [_problem(err, doc.source) for err in exc.errors(include_url=False)]
        first = problems[0]
        summary = first.message if len(problems) == 1 else f"{len(problems)} problems in the sidecar config"
        raise ConfigError(summary, first.location, [p.report() for p in problems]) from None


def config_from_dict(data: dict[str, Any]) -> SidecarConfig:
    """Validate a configuration given as Python data (used by embedders and the demo)."""
    try:
        return SidecarConfig.model_validate(data)
    except ValidationError as exc:
        found = [f"{_dotted(tuple(e.get('loc', ())))}: {e.get('msg')}" for e in exc.errors(include_url=False)]
        message = found[0] if len(found) == 1 else "; ".join(found)
        raise ConfigError(message, None, [f"error: {m}" for m in found]) from None


def field_names(loc: list[Any] | tuple[Any, ...]) -> list[str]:
    """The YAML field names of the section at ``loc`` (``["listen"]``, ``["workers", 0]``)."""
    model: Any = SidecarConfig
    for seg in loc:
        if isinstance(seg, int):
            continue  # a list item: the same model
        field = next((f for name, f in model.model_fields.items() if (f.alias or name) == seg), None)
        if field is None:
            return []
        model = model_of(field.annotation)
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The model class inside ``annotation`` (``Listen``, ``list[Worker]``, ``SecretRef | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = model_of(arg)
        if found is not None:
            return found
    return None


def bind_error(config: SidecarConfig, exc: OSError) -> str | None:
    """Which field of ``config`` holds the address a failed bind named, and why it failed
    (asyncio's ``create_server`` names the address in its message, ``... bind on address
    ('127.0.0.1', 7443): ...``; the reason is the error number's, as Python versions word
    the rest differently); None when ``exc`` is not a bind error."""
    found = re.search(r"bind on address \('([^']*)', (\d+)\): (.*)", str(exc))
    if found is None:
        return None
    host, port, reason = found.group(1), int(found.group(2)), found.group(3)
    if exc.errno is not None:
        reason = os.strerror(exc.errno)
        reason = reason[:1].lower() + reason[1:]
    fields = []
    if port == config.ops.port and host == config.ops.address:
        fields.append("ops.port (the /healthz, /readyz and /metrics endpoint)")
    for i, (worker, worker_port) in enumerate(zip(config.workers, config.worker_ports(), strict=True)):
        if worker_port == port and host == config.listen.address:
            if worker.port is not None:
                fields.append(f"workers[{i}].port (worker {worker.name!r})")
            else:
                fields.append(f"listen.basePort + {i} (worker {worker.name!r})")
    held_by = " or ".join(fields) or "listen.address/ops.address"
    return f"{held_by}: cannot listen on {host}:{port}: {reason}; choose a free port (or another address)"


def _subdomain(value: str, what: str) -> str:
    if len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise ValueError(f"expected {what} (DNS-1123 subdomain); found {value!r}")
    return value


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for seg in loc:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out or "config"


def _problem(err: Any, source: Any) -> ConfigError:
    path = list(err.get("loc", ()))  # YAML keys: pydantic reports errors by alias
    where = _dotted(tuple(path))
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "extra_forbidden":
        fields = field_names(path[:-1])
        expected = did_you_mean(str(path[-1]), list(fields)) if path else ""
        expected += f"; expected one of: {', '.join(fields)}" if fields else ""
        message = f"unknown field {where!r}{expected} (docs/sidecar-config.md)"
        location = source.location(tuple(path), key=True)
    elif kind == "missing":
        message = f"missing required field {where!r}"
        location = source.location(tuple(path[:-1]), key=True)
    else:
        message = f"{where}: {msg}" if path else msg
        location = source.location(tuple(path))
    return ConfigError(message, location)
