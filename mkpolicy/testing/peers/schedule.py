"""pytest-xdist's side of the real-peer tests: their groups, and ``--dist loadgroup`` dispatching them last.

Groups: each worker tells the controller which of its tests are real-peer tests, and in which
group, in a JSON file named after the run's ``testrunuid``. xdist's own channel, an
``@group`` suffix its workers append to each grouped test's id, is lost with pytest 9.2, whose
node ids are structured (pytest-xdist issue #1386: ``--dist loadgroup`` then silently groups
nothing); the file works with both.

Order: xdist hands out its largest groups first, and the real-peer groups are among the
largest; but on a cold first run their tests wait for the peers' build, so a worker given one
early would sit idle while other tests remain. Dispatched last, every other test runs during
the build. (Imported only under pytest-xdist: it needs ``xdist``.)
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

from mkpolicy.testing.peers.fixtures import is_real_peers_group, real_peers_rank

#: The controller's copy of the workers' groups: test id -> group.
GROUPS = pytest.StashKey[dict[str, str]]()


def groups_file(testrunuid: str) -> Path:
    """Where the workers of run ``testrunuid`` publish their real-peer groups."""
    return Path(tempfile.gettempdir()) / f"mkpolicy-real-peers-groups-{testrunuid}.json"


def publish_groups(config: pytest.Config, groups: dict[str, str]) -> None:
    """In a worker: write ``groups`` (test id -> group) for the controller (atomically: every worker
    writes the same)."""
    path = groups_file(config.workerinput["testrunuid"])  # type: ignore[attr-defined]
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    os.replace(partial, path)


def load_groups(node: Any) -> dict[str, str]:
    """In the controller, once ``node`` (a worker) has collected: its real-peer groups, kept in the
    config's stash for :class:`RealPeersLastScheduling`; the file is removed."""
    path = groups_file(node.workerinput["testrunuid"])
    config: pytest.Config = node.config
    if GROUPS not in config.stash:
        try:
            config.stash[GROUPS] = json.loads(path.read_text())
        except FileNotFoundError:  # a worker without this plugin (or no real-peer test)
            config.stash[GROUPS] = {}
    path.unlink(missing_ok=True)
    return config.stash[GROUPS]


class RealPeersLastScheduling(LoadGroupScheduling):  # type: ignore[misc]
    """``LoadGroupScheduling`` that groups the real-peer tests as the workers said, and hands
    their groups out only when nothing else is left, in build order (a Kueue version's group can
    start once its Kueue is built, while the next one builds)."""

    def _split_scope(self, nodeid: str) -> str:
        group = self.config.stash.get(GROUPS, {}).get(nodeid)
        return group if group is not None else str(super()._split_scope(nodeid))

    def _assign_work_unit(self, node: object) -> None:
        # The queue is ordered once it is built (its first pop), and again only if a crashed
        # worker's tests were put back behind the real-peer groups: cheap, the check is one key.
        if self.workqueue and is_real_peers_group(next(iter(self.workqueue))):
            for scope in sorted((s for s in self.workqueue if is_real_peers_group(s)), key=real_peers_rank):
                self.workqueue.move_to_end(scope)
        super()._assign_work_unit(node)
