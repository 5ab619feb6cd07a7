"""``mkpolicy test``: the suite format of docs/policy-tests.md, reports, snapshots and JUnit."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from mkpolicy.cli.main import main

POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: thing
spec:
  framework: Thing.v1.example.com
  failurePolicy: {failure}
  creation:
    patches:
      - type: ApplyConfiguration
        applyConfiguration:
          expression: 'Object{{metadata: Object.metadata{{annotations: {{"example.com/cluster": cluster}}}}}}'
      - type: JSONPatch
        jsonPatch:
          expression: |
            has(object.spec.broken) ? [JSONPatch{{op: "add", path: "/spec/x", value: object.spec.nope.x}}] : []
"""

MANAGER = """\
apiVersion: example.com/v1
kind: Thing
metadata:
  name: demo
  namespace: team-a
  uid: 1234
spec:
  managedBy: kueue.x-k8s.io/multikueue
  size: 3
"""

WORKER = MANAGER.replace("  uid: 1234\n", "") + "status:\n  phase: Running\n"

WORKER_COPY = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {
        "name": "demo",
        "namespace": "team-a",
        "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
        "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "wl-1", "example.com/cluster": "worker1"},
    },
    "spec": {"size": 3},
}


def make_project(tmp: Path, suite: str, failure: str = "Fail") -> Path:
    (tmp / "thing.yaml").write_text(POLICY.format(failure=failure))
    (tmp / "examples").mkdir(exist_ok=True)
    (tmp / "examples" / "thing.yaml").write_text(MANAGER)
    (tmp / "examples" / "thing-worker.yaml").write_text(WORKER)
    path = tmp / "thing.test.yaml"
    path.write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata:\n  name: thing\nspec:\n"
        "  policy: thing.yaml\n  context:\n    workloadName: wl-1\n  cases:\n" + textwrap.indent(suite, "    ")
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["test", "--color", "never", *argv])
    out, err = capsys.readouterr()
    return code, re.sub(r"\(\d+\.\d\d s\)", "(T s)", out), err


def worker_yaml(indent: int) -> str:
    return textwrap.indent(yaml.safe_dump(WORKER_COPY, sort_keys=False), " " * indent)


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_every_expectation_kind_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "expected").mkdir()
    (tmp_path / "expected" / "copy.yaml").write_text(yaml.safe_dump(WORKER_COPY))
    (tmp_path / "workload.yaml").write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: wl-1}\n"
    )
    make_project(
        tmp_path,
        textwrap.dedent(
            """\
        - name: inline worker copy
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            workerObject:
              WORKER_COPY
        - name: worker copy in a file, workload from a file
          phase: create
          managerObjectFile: examples/thing.yaml
          context: {workloadFile: workload.yaml}
          expect:
            workerObjectFile: expected/copy.yaml
        - name: status patch
          phase: sync
          managerObjectFile: examples/thing.yaml
          workerObjectFile: examples/thing-worker.yaml
          expect:
            statusPatch: {status: {phase: Running}}
        - name: nothing to write
          phase: sync
          managerObjectFile: examples/thing.yaml
          workerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: demo}}
          expect:
            statusPatch: null
        - name: not managed
          phase: create
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {}}
          expect:
            notManaged: true
        - name: not managed, with the reason
          phase: sync
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {managedBy: other}}
          workerObjectFile: examples/thing-worker.yaml
          expect:
            notManaged: 'to be "kueue.x-k8s.io/multikueue" not "other"'
        - name: an error
          phase: create
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {managedBy: kueue.x-k8s.io/multikueue, broken: true}}
          expect:
            error: "no such key: nope"
        - name: label mode
          phase: create
          managerObjectFile: examples/thing.yaml
          context: {identifier: label, cluster: worker2}
          expect:
            workerObject:
              apiVersion: example.com/v1
              kind: Thing
              metadata:
                name: demo
                namespace: team-a
                labels: {kueue.x-k8s.io/multikueue-origin: multikueue, kueue.x-k8s.io/prebuilt-workload-name: wl-1}
                annotations: {example.com/cluster: worker2}
              spec: {size: 3}
        """
        ).replace("      WORKER_COPY\n", worker_yaml(6)),
    )
    code, out, _ = run(capsys, ".")
    assert code == 0, out
    assert out.splitlines()[-1] == "8 passed, 0 failed, 0 errors in 1 suite (T s)"


def test_failures_report_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    make_project(
        tmp_path,
        textwrap.dedent(
            """\
        - name: wrong worker copy
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            workerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: demo}, spec: {size: 4}}
        - name: expected not managed
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            notManaged: true
        - name: expected an error
          phase: sync
          managerObjectFile: examples/thing.yaml
          workerObjectFile: examples/thing-worker.yaml
          expect:
            error: boom
        - name: wrong reason
          phase: create
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {}}
          expect:
            notManaged: elephants
        - name: no snapshot yet
          phase: sync
          managerObjectFile: examples/thing.yaml
          workerObjectFile: examples/thing-worker.yaml
        - name: missing object file
          phase: create
          managerObjectFile: examples/nope.yaml
        """
        ),
    )
    code, out, _ = run(capsys, "thing.yaml")
    assert code == 1
    assert out == snapshot


def test_update_snapshots_keeps_comments_and_style(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    (tmp_path / "expected").mkdir()
    (tmp_path / "expected" / "copy.yaml").write_text("# kept\napiVersion: example.com/v1  # kept too\nkind: Old\n")
    suite = make_project(
        tmp_path,
        textwrap.dedent(
            """\
        # creation
        - name: stale inline copy
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            workerObject:
              apiVersion: example.com/v1  # the group's version
              kind: Thing
              metadata: {name: old}
              spec:
                size: 2               # changed by the policy
        - name: stale file
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            workerObjectFile: expected/copy.yaml
        - name: new file
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            workerObjectFile: expected/new/copy.yaml
        # status
        - name: no expectation yet
          phase: sync
          managerObjectFile: examples/thing.yaml
          workerObjectFile: examples/thing-worker.yaml
        - name: assertions are never rewritten
          phase: create
          managerObjectFile: examples/thing.yaml
          expect:
            notManaged: true
        """
        ),
    )
    code, out, _ = run(capsys, "--update-snapshots", ".")
    assert code == 1
    assert out.splitlines()[-1] == "4 passed, 1 failed, 0 errors in 1 suite (T s); 4 snapshots updated"
    assert suite.read_text() == snapshot(name="suite")
    assert (tmp_path / "expected" / "copy.yaml").read_text() == snapshot(name="file")
    assert yaml.safe_load((tmp_path / "expected" / "new" / "copy.yaml").read_text()) == WORKER_COPY
    code, out, _ = run(capsys, "-k", "stale", ".")
    assert (code, out.splitlines()[-1]) == (0, "2 passed, 0 failed, 0 errors in 1 suite (T s)")


def test_junit_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_project(
        tmp_path,
        textwrap.dedent(
            """\
        - name: passes
          phase: create
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {}}
          expect: {notManaged: true}
        - name: fails
          phase: create
          managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {}}
          expect: {error: boom}
        - name: errors
          phase: create
          managerObjectFile: missing.yaml
          expect: {error: boom}
        """
        ),
    )
    (tmp_path / "broken.test.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata: {name: broken}\nspec: {policy: thing.yaml}\n"
    )
    code, _, _ = run(capsys, "--junit", "report.xml", ".")
    assert code == 1
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "4", "1", "2")
    suites = {s.get("name"): s for s in root}
    assert [(c.get("name"), [child.tag for child in c]) for c in suites["thing"]] == [
        ("passes", []),
        ("fails", ["failure"]),
        ("errors", ["error"]),
    ]
    failure = suites["thing"][1][0]
    assert (
        failure.get("message")
        == 'expected an error containing \'boom\'; found: not managed (Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not "")'
    )
    assert suites["thing"][1].get("line") == "14"
    (broken,) = suites["broken"]
    assert broken[0].tag == "error" and "missing required field 'spec.cases'" in (broken[0].text or "")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "- name: x\n  phase: create\n  managerObject: {}\n  managerObjectFile: a.yaml\n",
            "thing.test.yaml:10:7: spec.cases[0]: expected exactly one of managerObject and managerObjectFile",
        ),
        ("- name: x\n  phase: sync\n  managerObject: {}\n", "a sync case needs the worker's object"),
        (
            "- name: x\n  phase: create\n  managerObject: {}\n  expect: {statusPatch: null}\n",
            "expect.statusPatch belongs to sync cases",
        ),
        (
            "- name: x\n  phase: create\n  managerObject: {}\n  expect: {notManaged: true, error: x}\n",
            "expected exactly one of workerObject, workerObjectFile, statusPatch, integration, notManaged, error; found notManaged, error",
        ),
        (
            "- name: x\n  phase: create\n  managerObject: {}\n  expect: {notManaged: false}\n",
            "expected true or a substring of the reason; found false",
        ),
        (
            "- name: x\n  phase: delete\n  managerObject: {}\n",
            "thing.test.yaml:11:14: spec.cases[0].phase: expected 'create', 'sync' or 'integration'",
        ),
        (
            "- name: x\n  phase: create\n  managerObject: {}\n  expected: {}\n",
            "thing.test.yaml:13:7: unknown field 'spec.cases[0].expected'",
        ),
    ],
    ids=[
        "two-inputs",
        "sync-without-worker",
        "create-with-status-patch",
        "two-expectations",
        "not-managed-false",
        "bad-phase",
        "unknown-field",
    ],
)
def test_invalid_suites_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    make_project(tmp_path, case)
    code, out, _ = run(capsys, ".")
    assert code == 1
    assert "ERROR the suite cannot run" in out
    assert message in out


def test_policy_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = make_project(
        tmp_path,
        "- name: x\n  phase: create\n  managerObject: {apiVersion: a/v1, kind: Thing}\n  expect: {notManaged: true}\n",
    )
    policy = tmp_path / "thing.yaml"
    policy.write_text(
        policy.read_text()
        + "---\n"
        + POLICY.format(failure="Fail").replace("name: thing", "name: other").replace("Thing.v1", "Other.v1")
    )
    code, out, _ = run(capsys, ".")
    assert code == 1 and "holds 2 policies (thing, other); name one with spec.policyName" in out
    suite.write_text(suite.read_text().replace("  policy: thing.yaml\n", "  policy: thing.yaml\n  policyName: other\n"))
    code, out, _ = run(capsys, ".")
    assert code == 0, out
    suite.write_text(suite.read_text().replace("policyName: other", "policyName: ghost"))
    assert "spec.policyName 'ghost': the file holds policies thing, other" in run(capsys, ".")[1]


def test_ignored_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = "  managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x}, spec: {managedBy: kueue.x-k8s.io/multikueue, broken: 1}}\n"
    expected = (
        "  expect:\n    workerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: x, labels: {kueue.x-k8s.io/multikueue-origin: multikueue},"
        " annotations: {kueue.x-k8s.io/prebuilt-workload-name: wl-1, example.com/cluster: worker1}}, spec: {broken: 1}}\n"
    )
    cases = (
        "- name: silent skip fails\n  phase: create\n"
        + broken
        + expected
        + "- name: listed skip passes\n  phase: create\n"
        + broken
        + expected
        + "    ignoredErrors: [nope]\n"
        + "- name: stale pattern fails\n  phase: create\n  managerObjectFile: examples/thing.yaml\n  expect:\n    workerObject:\n"
        + worker_yaml(6)
        + "    ignoredErrors: [nope]\n"
    )
    make_project(tmp_path, cases, failure="Ignore")
    code, out, _ = run(capsys, ".")
    assert code == 1
    statuses = [
        line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()[0] in ("PASS", "FAIL")
    ]
    assert statuses == ["FAIL", "PASS", "FAIL"]
    assert "a patch failed and was skipped (failurePolicy Ignore)" in out
    assert "expect.ignoredErrors: no skipped patch failed with an error containing 'nope'" in out


def test_discovery_and_coverage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_project(
        tmp_path,
        "- name: x\n  phase: create\n  managerObject: {apiVersion: a/v1, kind: Thing}\n  expect: {notManaged: true}\n",
    )
    lonely = tmp_path / "lonely.yaml"
    lonely.write_text(
        POLICY.format(failure="Fail").replace("name: thing", "name: lonely").replace("Thing.v1", "Lonely.v1")
    )
    assert run(capsys, "thing.yaml")[0] == 0
    assert run(capsys, "thing.test.yaml")[0] == 0
    code, _, err = run(capsys, "lonely.yaml")
    assert code == 2 and "no test suite next to this policy (expected lonely.test.yaml)" in err
    assert run(capsys, ".")[0] == 0
    code, out, _ = run(capsys, "--require-suites", ".")
    assert code == 1
    assert "lonely.yaml: error: policy file has no test suite" in out
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "empty")
    assert code == 2 and "directory holds no test suites" in err
    assert run(capsys, "nowhere")[0] == 2
    code, _, err = run(capsys, "-k", "no such case", ".")
    assert code == 2 and "-k 'no such case': no case name contains it" in err


THING_SCHEMA = """\
type: object
properties:
  spec:
    type: object
    properties:
      managedBy: {type: string}
      size: {type: integer, maximum: 10}
      mode: {type: string, enum: [fast, slow]}
  status:
    type: object
    properties:
      phase: {type: string}
"""

#: A number for /status/phase that no static type reveals (an element of a list of dyn): the API
#: server refuses it, lint cannot know (a dyn() around a typed value would be MKP506).
UNTYPED_PHASE = '[dyn(size(workerObject.status.phase)), dyn("")][0]'
SCHEMA_POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: thing
spec:
  framework: Thing.v1.example.com
  schema: thing.schema.yaml
  creation:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/spec/mode", value: object.spec.size > 5 ? "turbo" : "fast"}]'
  sync:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/status/phase", value: PHASE}]'
""".replace("PHASE", UNTYPED_PHASE)


def test_a_policy_the_sidecar_would_refuse_fails_its_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The same checker as lint, validate and the sidecar: lint's lines, not passing tests.
    (tmp_path / "thing.schema.yaml").write_text(THING_SCHEMA)
    (tmp_path / "thing.yaml").write_text(SCHEMA_POLICY.replace(UNTYPED_PHASE, "7"))
    (tmp_path / "thing.test.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata:\n  name: thing\nspec:\n"
        "  policy: thing.yaml\n  context:\n    workloadName: wl-1\n  cases:\n"
        "    - {name: create, phase: create, managerObject: {apiVersion: example.com/v1, kind: Thing, metadata: "
        "{name: t}, spec: {managedBy: kueue.x-k8s.io/multikueue, size: 1}}}\n"
    )
    code, out, _ = run(capsys, ".")
    assert code == 1, out
    assert "the suite cannot run" in out and "MKP506 sync patch #1 (JSONPatch): /status/phase" in out, out
    assert "PASS" not in out


def test_results_the_api_server_would_refuse_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "thing.schema.yaml").write_text(THING_SCHEMA)
    (tmp_path / "thing.yaml").write_text(SCHEMA_POLICY)
    manager = "{apiVersion: example.com/v1, kind: Thing, metadata: {name: t}, spec: {managedBy: kueue.x-k8s.io/multikueue, size: SIZE}}"
    worker = "{apiVersion: example.com/v1, kind: Thing, metadata: {name: t}, status: {phase: Running}}"
    cases = (
        "- name: a valid worker copy\n  phase: create\n  managerObject: " + manager.replace("SIZE", "3") + "\n"
        "  expect: {workerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: t, labels: "
        "{kueue.x-k8s.io/multikueue-origin: multikueue}, annotations: {kueue.x-k8s.io/prebuilt-workload-name: wl-1}}, "
        "spec: {size: 3, mode: fast}}}\n"
        # the manager's object already breaks the schema (size 12 > 10): not the policy's doing, not reported
        "- name: a refused worker copy\n  phase: create\n  managerObject: " + manager.replace("SIZE", "12") + "\n"
        "  expect: {workerObject: {apiVersion: example.com/v1, kind: Thing, metadata: {name: t, labels: "
        "{kueue.x-k8s.io/multikueue-origin: multikueue}, annotations: {kueue.x-k8s.io/prebuilt-workload-name: wl-1}}, "
        "spec: {size: 12, mode: turbo}}}\n"
        "- name: a refused status write\n  phase: sync\n  managerObject: "
        + manager.replace("SIZE", "3")[:-1]
        + ", status: {phase: Pending}}\n"
        "  workerObject: " + worker + "\n"
        "  expect: {statusPatch: {status: {phase: 7}}}\n"
    )
    (tmp_path / "thing.test.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata:\n  name: thing\nspec:\n"
        "  policy: thing.yaml\n  context:\n    workloadName: wl-1\n  cases:\n" + textwrap.indent(cases, "    ")
    )
    code, out, _ = run(capsys, ".")
    assert code == 1, out
    statuses = [line.split()[0] for line in out.splitlines() if line.split()[:1] in (["PASS"], ["FAIL"])]
    assert statuses == ["PASS", "FAIL", "FAIL"], out
    assert (
        "the worker's API server would refuse the worker copy (spec.schema): "
        'spec.mode: Unsupported value: "turbo": supported values: "fast", "slow"' in out
    )
    assert "spec.size" not in out
    assert (
        "the manager's API server would refuse the status write (spec.schema): "
        'status.phase: Invalid value: "integer": status.phase in body must be of type string: "integer"' in out
    )


def test_worker_copies_with_labels_the_api_server_refuses_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No spec.schema needed: the worker's API server validates ObjectMeta on every create."""
    (tmp_path / "thing.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata:\n  name: thing\nspec:\n"
        "  framework: Thing.v1.example.com\n  creation:\n    patches:\n"
        "      - type: ApplyConfiguration\n        applyConfiguration:\n          expression: >-\n"
        '            Object{metadata: Object.metadata{labels: {"acme.io/workload": workloadName, '
        '"acme.io/team": params.team}}}\n'
        "  params: {team: Aero Team}\n"
    )
    manager = (
        "{apiVersion: example.com/v1, kind: Thing, metadata: {name: t, namespace: ns}, "
        "spec: {managedBy: kueue.x-k8s.io/multikueue}}"
    )
    long_name = "thing-t-" + "0123456789" * 6
    (tmp_path / "thing.test.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata:\n  name: thing\nspec:\n"
        f"  policy: thing.yaml\n  context:\n    workloadName: {long_name}\n  cases:\n"
        f"    - {{name: labels, phase: create, managerObject: {manager}}}\n"
    )
    code, out, _ = run(capsys, ".")
    assert code == 1, out
    assert "FAIL" in out and "PASS" not in out, out
    assert (
        "the worker's API server would refuse the worker copy (ObjectMeta): "
        f'metadata.labels: Invalid value: "{long_name}": must be no more than 63 bytes; '
        'metadata.labels: Invalid value: "Aero Team": a valid label must be an empty string' in out
    ), out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "thing.schema.yaml").write_text(THING_SCHEMA)
    (tmp_path / "thing.yaml").write_text(SCHEMA_POLICY)
    manager = (
        "{apiVersion: example.com/v1, kind: Thing, metadata: {name: t}, "
        "spec: {managedBy: kueue.x-k8s.io/multikueue, size: 3}}"
    )
    (tmp_path / "thing.test.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\nmetadata:\n  name: thing\nspec:\n"
        "  policy: thing.yaml\n  context:\n    workloadName: wl-1\n  cases:\n"
        f"    - {{name: managed, phase: create, managerObject: {manager}, expect: {{notManaged: true}}}}\n"
    )
    code = main(["test", "--output", "json", "."])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    assert code == 1 and report["exitCode"] == 1
    [suite] = report["suites"]
    assert (suite["file"], suite["name"], suite["policy"]) == ("thing.test.yaml", "thing", "thing.yaml")
    [case] = suite["cases"]
    assert case["name"] == "managed" and case["status"] == "failed" and case["location"].startswith("thing.test.yaml:")
    assert case["message"]
    assert report["summary"]["failed"] == 1 and report["summary"]["passed"] == 0
