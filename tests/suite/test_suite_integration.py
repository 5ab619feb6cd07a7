"""``phase: integration`` cases: the snapshots, and the properties every case checks (MKP605, MKP606)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mkpolicy.cli.main import main

POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: thing
spec:
  framework: Thing.v1.example.com
  integration:
    isSuspended: 'object.spec.?paused.orValue(false)'
    suspend:
      - type: JSONPatch
        jsonPatch: {expression: '[JSONPatch{op: "add", path: "/spec/paused", value: true}]'}
    resume:
      - type: JSONPatch
        jsonPatch: {expression: 'RESUME'}
    podSets: '[{"name": "main", "count": dyn(object.spec.size), "template": object.spec.template}]'
    inject:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "add", path: "/spec/template/spec/nodeSelector", value: podSetsInfo[0].nodeSelector}]'
    restore:
      - type: JSONPatch
        jsonPatch:
          expression: 'RESTORE'
    finished: '{"finished": object.?status.?done.orValue(false)}'
    active: 'object.?status.?running.orValue(0) > 0'
"""

GOOD_RESTORE = '[JSONPatch{op: "add", path: "/spec/template/spec/nodeSelector", value: podSetsInfo[0].nodeSelector}]'
GOOD_RESUME = '[JSONPatch{op: "remove", path: "/spec/paused"}]'

THING = """\
apiVersion: example.com/v1
kind: Thing
metadata: {name: demo, namespace: team-a, uid: u-1, labels: {kueue.x-k8s.io/queue-name: q}}
spec:
  size: 2
  template: {spec: {containers: [{name: c, image: busybox}]}}
"""

SUITE = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicyTest
metadata: {name: thing}
spec:
  policy: thing.yaml
  cases:
    - name: queues and starts
      phase: integration
      managerObjectFile: thing-object.yaml
      podSetsInfo: [{name: main, count: 2, nodeSelector: {zone: a}}]
"""


def write(
    tmp_path: Path, restore: str = GOOD_RESTORE, resume: str = GOOD_RESUME, suite: str = SUITE, thing: str = THING
) -> Path:
    (tmp_path / "thing.yaml").write_text(POLICY.replace("RESTORE", restore).replace("RESUME", resume))
    (tmp_path / "thing-object.yaml").write_text(thing)
    path = tmp_path / "thing.test.yaml"
    path.write_text(suite)
    return path


def test_update_then_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    assert main(["test", str(path), "--update-snapshots"]) == 0
    recorded = path.read_text()
    assert "name: thing-demo-" in recorded and "zone: a" in recorded and "kueue.x-k8s.io/queue-name" in recorded
    assert "&id" not in recorded  # no YAML aliases in snapshots
    capsys.readouterr()
    assert main(["test", str(path)]) == 0
    assert "PASS  queues and starts" in capsys.readouterr().out


def test_a_restore_that_forgets_a_field_is_mkp605(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, restore="[]")
    assert main(["test", str(path), "--update-snapshots"]) == 1
    out = capsys.readouterr().out
    assert "MKP605 inject-restore-round-trip" in out


def test_a_resume_that_does_not_resume_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, resume="[]")
    assert main(["test", str(path)]) == 1
    assert "after the resume patches isSuspended is still true" in capsys.readouterr().out


def test_a_user_suspended_object_is_never_started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, thing=THING.replace("  size: 2\n", "  size: 2\n  paused: true\n"))
    assert main(["test", str(path), "--update-snapshots"]) == 0
    recorded = path.read_text()
    injected = recorded[recorded.index("injected:") : recorded.index("restored:")]
    assert "paused: true" in injected and "zone: a" in injected  # injected, never resumed


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "      podSetsInfo: [{name: main}]\n      expect: {statusPatch: {}}\n",
            "an integration case expects integration or error; found statusPatch",
        ),
        ("      workerObject: {}\n", "an integration case has no worker object input"),
    ],
)
def test_case_shape_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str) -> None:
    suite = SUITE.replace("      podSetsInfo: [{name: main, count: 2, nodeSelector: {zone: a}}]\n", case)
    path = write(tmp_path, suite=suite)
    assert main(["test", str(path)]) == 1
    assert message in capsys.readouterr().out


def test_pod_set_info_on_a_create_case_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = SUITE.replace("phase: integration", "phase: create")
    path = write(tmp_path, suite=suite)
    assert main(["test", str(path)]) == 1
    assert "podSetsInfo and priorityClasses belong to integration cases" in capsys.readouterr().out


def test_a_policy_without_integration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    text = (tmp_path / "thing.yaml").read_text()
    (tmp_path / "thing.yaml").write_text(text[: text.index("  integration:")])
    assert main(["test", str(path)]) == 1
    assert "has no spec.integration" in textwrap.dedent(capsys.readouterr().out)
