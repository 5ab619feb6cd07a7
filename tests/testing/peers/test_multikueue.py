"""The real-peer MultiKueue's arguments, checked before anything starts."""

from __future__ import annotations

import pytest

from mkpolicy.testing.peers.multikueue import RealMultiKueue


def test_the_sidecar_stands_only_in_front_of_workers_it_has() -> None:
    with pytest.raises(ValueError) as info:
        RealMultiKueue(2, sidecar_workers=["worker1", "worker3"])
    assert str(info.value) == "sidecar_workers: expected some of ['worker1', 'worker2'], found ['worker3']"
