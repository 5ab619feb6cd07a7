"""The sidecar proxy between the Kueue manager and its worker clusters (docs/architecture.md, "The wire").

Modules, one job each:

* ``config`` — the ``SidecarConfig`` file (pydantic), validated at start;
* ``endpoints`` — CA, serving certificate and tokens; the kubeconfig Kueue gets per worker;
* ``paths`` — which resource and verb a Kubernetes REST path addresses;
* ``contract`` — the wire contract: the request shapes Kueue sends a worker (all that is forwarded);
* ``transform`` — the policy's create/sync applied to objects on the wire;
* ``execution`` — where evaluations run (inline when proven fast, else on threads);
* ``status`` — Kubernetes ``Status`` error bodies;
* ``http1``, ``conn``, ``listener`` — HTTP/1.1 on the wire: message heads and framing,
  buffered connections with flow control, the TLS listener with keep-alive;
* ``proxy`` — one worker endpoint: what is transformed (creates, full reads of policy kinds), what passes;
* ``forward`` — the endpoint's transport: sending to the worker, pass-through relay (watches included);
* ``fastpath`` — plain reads answered from protocol callbacks, without waking a task;
* ``relay`` — copying a worker's answer to the client (streams, breaks, Status errors);
* ``upstream`` — the keep-alive connection pool to one real worker;
* ``bodies`` — request bodies of policy kinds: JSON, or CBOR as client-go sends it;
* ``managerread`` — live reads of the manager's objects (``manager.reads: direct``) on that pool's connections;
* ``cache`` — the watch cache of the manager's objects of a policy kind (``manager.reads: cache``);
* ``policies`` — the active policy set and its hot reload;
* ``kueueconfig`` — what the Kueue beside the sidecar is configured with, and what disagrees;
* ``workers`` — each worker's real kubeconfig, followed (rotations), and whether it is served;
* ``wiring`` — ``--wire``/``--unwire`` of the MultiKueueCluster Secrets;
* ``events`` — Kubernetes Events on the manager's objects (client-go's correlation);
* ``metrics``, ``logs``, ``ops`` — Prometheus, JSON logs, probes;
* ``server`` — the :class:`Sidecar` tying them together (start, stop, run).
"""

from mkpolicy.sidecar.config import ConfigError, SidecarConfig, config_from_dict, load_config
from mkpolicy.sidecar.logs import setup_logging
from mkpolicy.sidecar.policies import ReloadError
from mkpolicy.sidecar.server import Sidecar, manager_rest_config, unwire_all

__all__ = [
    "ConfigError",
    "ReloadError",
    "Sidecar",
    "SidecarConfig",
    "config_from_dict",
    "load_config",
    "manager_rest_config",
    "setup_logging",
    "unwire_all",
]
