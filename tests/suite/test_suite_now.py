"""``context.now`` in policy test suites: CEL's ``now`` made reproducible."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mkpolicy.cli.main import main

POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: stamp
spec:
  framework: Thing.v1.example.com
  sync:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "add", path: "/status", value: {"at": string(now)}}]'
"""

SUITE = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicyTest
metadata:
  name: stamp
spec:
  policy: stamp.yaml
  context:
    workloadName: wl-1
    now: {default}
  cases:
    - name: suite default
      phase: sync
      managerObject: &manager
        apiVersion: example.com/v1
        kind: Thing
        metadata: {{name: demo, namespace: team-a}}
        spec: {{managedBy: kueue.x-k8s.io/multikueue}}
      workerObject: *manager
      expect:
        statusPatch: {{status: {{at: "{expected}"}}}}
    - name: case override
      phase: sync
      managerObject: *manager
      workerObject: *manager
      context: {{now: "2031-12-31T23:59:59.9+01:00"}}
      expect:
        statusPatch: {{status: {{at: "2031-12-31T22:59:59Z"}}}}
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], default: str, expected: str) -> tuple[int, str]:
    (tmp_path / "stamp.yaml").write_text(POLICY)
    (tmp_path / "stamp.test.yaml").write_text(SUITE.format(default=default, expected=expected))
    code = main(["test", "--color", "never", str(tmp_path / "stamp.test.yaml")])
    out, err = capsys.readouterr()
    return code, re.sub(r"\(\d+\.\d\d s\)", "(T s)", out + err)


@pytest.mark.parametrize(
    "default",
    ['"2026-05-04T10:00:30Z"', "2026-05-04T10:00:30Z", '"2026-05-04T12:00:30.5+02:00"'],
    ids=["quoted", "yaml-timestamp", "offset-and-fraction"],
)
def test_now_from_the_suite_and_the_case(tmp_path: Path, capsys: pytest.CaptureFixture[str], default: str) -> None:
    code, out = _run(tmp_path, capsys, default, "2026-05-04T10:00:30Z")
    assert code == 0, out
    assert "2 passed, 0 failed" in out


def test_a_wrong_expectation_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys, '"2026-05-04T10:00:30Z"', "2026-05-04T10:00:31Z")
    assert code != 0
    assert "1 passed, 1 failed" in out


def test_now_needs_a_zone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys, '"2026-05-04T10:00:30"', "2026-05-04T10:00:30Z")
    assert code != 0
    assert "RFC 3339 time with a zone" in out
