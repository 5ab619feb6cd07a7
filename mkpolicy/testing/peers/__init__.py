"""Real test peers built from Go modules: etcd, kube-apiserver and Kueue (docs/testing.md, "Real peers").

- :mod:`.build` builds the binaries from the checkout's ``peers/`` Go modules into a
  cache keyed by versions (``mkpolicy dev build-peers``);
- :class:`.controlplane.ControlPlane`: one etcd and real kube-apiservers (:class:`.controlplane.KubeCluster`);
- :class:`.multikueue.RealMultiKueue`: a manager and workers with real Kueue, MultiKueue
  configured, optionally the sidecar in between (``mkpolicy dev multikueue --real``).

The pytest fixtures are in :mod:`mkpolicy.testing.peers.fixtures`.
"""
