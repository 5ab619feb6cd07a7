"""One checker: what ``mkpolicy lint`` reports as an error, ``validate``, ``sidecar --check``
and the sidecar's policy loader (at start and on hot reload) refuse, with the same lines.

Each case is a policy for an in-house ``TrainingRun`` CRD (``data/``) with one problem
that used to pass everything but lint (or everything, lint included) and then failed at
run time.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from mkpolicy.check import check_paths
from mkpolicy.cli.main import main
from mkpolicy.kube.client import ResourceInfo
from mkpolicy.policy import GVK
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.policies import PolicyStore, ReloadError, compile_directory

DATA = Path(__file__).parent / "data"
CRD = "ml.example.com_trainingruns.yaml"

GOOD = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: trainingrun}
spec:
  framework: TrainingRun.v1.ml.example.com
  schema: ml.example.com_trainingruns.yaml
"""


def creation(expression: str, patch_type: str = "JSONPatch") -> str:
    field = "jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"
    return GOOD + f"  creation:\n    patches:\n      - type: {patch_type}\n        {field}:\n          expression: '{expression}'\n"


#: (id, policy text, the rules that must fire as errors)
CASES = [
    (
        "cel-type-error",
        GOOD + "  matchConditions:\n    - {name: big, expression: 'object.spec.replicas > \"2\"'}\n",
        ["MKP204"],
    ),
    (
        "misspelled-field-in-has",
        creation('has(object.spec.nodeSelecter) ? [JSONPatch{op: \"remove\", path: \"/spec/nodeSelector\"}] : []'),
        ["MKP204"],
    ),
    (
        "framework-group-typo",
        GOOD.replace("ml.example.com\n", "ml.exmaple.com\n", 1),
        ["MKP108"],
    ),
    (
        "int-annotation-value",
        creation('[JSONPatch{op: \"add\", path: \"/metadata/annotations/ml.example.com~1gpus\", value: 8}]'),
        ["MKP507"],
    ),
    (
        "remove-of-an-undeclared-path",
        creation('[JSONPatch{op: \"remove\", path: \"/spec/nodeSelecter\"}]'),
        ["MKP504"],
    ),
    (
        "apply-configuration-sets-an-atomic-list",
        creation('Object{spec: Object.spec{args: [\"--fast\"]}}', "ApplyConfiguration"),
        ["MKP508"],
    ),
    (
        "map-list-item-without-its-key",
        creation('Object{spec: Object.spec{ports: [Object.spec.ports{port: 80}]}}', "ApplyConfiguration"),
        ["MKP509"],
    ),
    (
        "jsonpatch-field-of-the-wrong-type",
        creation('[JSONPatch{op: \"add\", path: 3, value: 1}]'),
        ["MKP202"],
    ),
]


def policy_dir(tmp_path: Path, text: str) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    shutil.copy(DATA / CRD, directory / CRD)
    (directory / "trainingrun.yaml").write_text(text)
    return directory


def error_lines(directory: Path) -> list[str]:
    return [f.report() for f in check_paths([str(directory)]).findings if f.severity == "error"]


def test_the_good_policy_passes_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = policy_dir(tmp_path, GOOD)
    assert error_lines(directory) == []
    assert main(["validate", "-q", str(directory)]) == 0
    assert [a.name for a in compile_directory(str(directory))] == ["trainingrun"]


@pytest.mark.parametrize(("text", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lint_errors_are_refused_by_validate_check_and_the_loader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, rules: list[str]
) -> None:
    directory = policy_dir(tmp_path, text)
    lines = error_lines(directory)
    assert [line.split()[2] for line in lines] == rules

    assert main(["validate", str(directory)]) == 1
    out, _ = capsys.readouterr()
    assert out.splitlines() == lines

    with pytest.raises(ReloadError) as info:
        compile_directory(str(directory))
    assert info.value.message.splitlines() == lines

    config = tmp_path / "sidecar.yaml"
    config.write_text("workers:\n  - name: worker1\n    kubeconfig: {secret: {name: worker1-secret}}\n")
    assert main(["sidecar", "--check", "--policies", str(directory), "--config", str(config)]) == 1
    _, err = capsys.readouterr()
    assert err.splitlines() == lines


async def _resolve(gvk: GVK) -> ResourceInfo:
    return ResourceInfo(gvk.group, gvk.version, gvk.kind, gvk.kind.lower() + "s", True)


@pytest.mark.parametrize(("text", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hot_reload_to_a_policy_with_errors_is_refused(tmp_path: Path, text: str, rules: list[str]) -> None:
    directory = policy_dir(tmp_path, GOOD)
    metrics = Metrics()

    async def scenario() -> None:
        store = PolicyStore(str(directory), _resolve, metrics)
        assert await store.reload(force=True)
        good = store.active
        (directory / "trainingrun.yaml").write_text(text)
        with pytest.raises(ReloadError) as info:
            await store.reload()
        assert info.value.message.splitlines() == error_lines(directory)
        assert store.active is good  # the last good set keeps running, nothing pending
        assert good is not None and not good.pending

    asyncio.run(scenario())


#: Cases whose error is the engine's own at run time (the others are the worker API server's).
RUN_TIME = {
    "remove-of-an-undeclared-path": "cannot remove '/spec/nodeSelecter': the member does not exist",
    "apply-configuration-sets-an-atomic-list": ".spec.args is an atomic list and may not be set",
    "map-list-item-without-its-key": "associative list with keys has an element that omits all key fields",
}


@pytest.mark.parametrize("case", sorted(RUN_TIME))
def test_what_lint_says_is_what_happens_at_run_time(tmp_path: Path, case: str) -> None:
    import mkpolicy
    from mkpolicy.errors import PatchError

    text = next(c[1] for c in CASES if c[0] == case)
    directory = policy_dir(tmp_path, text)
    adapter = mkpolicy.compile(mkpolicy.load(str(directory / "trainingrun.yaml"))[0])
    job = {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingRun",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "image": "trainer:1", "args": ["--slow"]},
    }
    with pytest.raises(PatchError, match=RUN_TIME[case].replace("[", r"\[").replace(".", r"\.")):
        adapter.create(job, mkpolicy.Context(workload_name="wl"))
