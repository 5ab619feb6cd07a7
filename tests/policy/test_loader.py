from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mkpolicy.errors import InputError, PolicyError
from mkpolicy.policy import load, loads

HEADER = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: tekton
"""


def reports(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        loads(textwrap.dedent(text), "p.yaml")
    return [p.report() for p in info.value.problems]


def test_minimal_policy_gets_the_generic_defaults() -> None:
    (policy,) = loads(HEADER + "spec:\n  framework: PipelineRun.v1.tekton.dev\n", "p.yaml")
    spec = policy.spec
    assert (spec.managed_by and spec.managed_by.path, spec.managed_by and spec.managed_by.value) == (
        "/spec/managedBy",
        "kueue.x-k8s.io/multikueue",
    )
    assert spec.failure_policy == "Fail"
    assert spec.creation.patches == [] and spec.sync.patches == []
    assert spec.creation.workload_identifier == "context"
    assert (spec.sync.mode, spec.sync.subresource) == ("writeBack", "status")
    assert policy.file == "p.yaml"


def test_managed_by_null_means_always_managed() -> None:
    (policy,) = loads(HEADER + "spec:\n  framework: StatefulSet.v1.apps\n  managedBy: null\n", "p.yaml")
    assert policy.spec.managed_by is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            "spec:\n  framework: PipelineRun.v1.tekton.dev\n  failurePolicy: Sometimes\n",
            ["p.yaml:7:18: error: spec.failurePolicy: expected 'Fail' or 'Ignore'; found the string 'Sometimes'"],
            id="enum",
        ),
        pytest.param(
            "spec:\n  framework: PipelineRun.v1.tekton.dev\n  params: [1]\n  creation: {patches: x}\n"
            "  managedBy: {value: 3}\n",
            [
                "p.yaml:7:11: error: spec.params: expected a mapping; found a list",
                "p.yaml:8:23: error: spec.creation.patches: expected a list; found the string 'x'",
                "p.yaml:9:22: error: spec.managedBy.value: expected a string; found the integer 3",
            ],
            id="wrong-types",
        ),
        pytest.param(
            "spec:\n  framework: PipelineRun.v1.tekton.dev\n  bogus: 1\n",
            [
                "p.yaml:7:3: error: unknown field 'spec.bogus'; expected one of: creation, failurePolicy, "
                "framework, integration, managedBy, matchConditions, params, schema, sync, variables"
            ],
            id="unknown-field",
        ),
        pytest.param(
            "spec:\n  framework: pipelinerun\n",
            [
                "p.yaml:6:14: error: spec.framework: expected Kind.version.group, e.g. 'PipelineRun.v1.tekton.dev' "
                "or 'Job.v1.batch'; found 'pipelinerun' (no version)"
            ],
            id="bad-gvk",
        ),
        pytest.param(
            "spec:\n  managedBy: {path: spec/managedBy}\n",
            [
                "p.yaml:5:1: error: missing required field 'spec.framework'",
                "p.yaml:6:21: error: spec.managedBy.path: expected a JSON pointer such as '/spec/managedBy'; "
                "found 'spec/managedBy'",
            ],
            id="missing-and-pointer",
        ),
        pytest.param(
            """\
            spec:
              framework: PipelineRun.v1.tekton.dev
              creation:
                patches:
                  - type: Foo
                  - type: JSONPatch
                    jsonPatch: {expresion: x}
            """,
            [
                "p.yaml:9:15: error: spec.creation.patches[0].type: expected one of 'JSONPatch', "
                "'ApplyConfiguration'; found 'Foo'",
                "p.yaml:11:9: error: missing required field 'spec.creation.patches[1].jsonPatch.expression'",
                "p.yaml:11:21: error: unknown field 'spec.creation.patches[1].jsonPatch.expresion' "
                "(did you mean 'expression'?); expected one of: expression",
            ],
            id="patches",
        ),
        pytest.param(
            """\
            spec:
              framework: PipelineRun.v1.tekton.dev
              variables:
                - {name: a, expression: "1"}
                - {name: a, expression: "2"}
            """,
            ["p.yaml:8:5: error: spec.variables: duplicate name 'a' (items 0 and 1): every name must be unique"],
            id="duplicate-variables",
        ),
        pytest.param(
            "spec:\n  framework: PipelineRun.v1.tekton.dev\n  matchConditions:\n"
            "    - {name: not-an-ident, expression: 'true'}\n",
            [
                "p.yaml:8:14: error: spec.matchConditions[0].name: expected a CEL identifier (letters, digits, "
                "'_'); found 'not-an-ident'"
            ],
            id="bad-name",
        ),
        pytest.param(
            "spec:\n  framework: Job.v1.batch\n  sync: {mode: none, patches: [{type: JSONPatch, jsonPatch: "
            "{expression: '[]'}}]}\n",
            [
                "p.yaml:7:9: error: spec.sync: sync.patches are never applied with sync.mode 'none'; "
                "remove them or the mode"
            ],
            id="sync-none-with-patches",
        ),
    ],
)
def test_document_errors_point_into_the_file(body: str, expected: list[str]) -> None:
    assert sorted(reports(HEADER + textwrap.dedent(body))) == sorted(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "a: [1\n",
            "p.yaml:2:1: error: malformed YAML: a '[' that is not closed by ']' (or a missing ',' between items) "
            "[YAML: expected ',' or ']', but got '<stream end>']",
        ),
        ("a: 1\na: 2\n", 'p.yaml:2:1: error: malformed YAML: duplicate key: "a"'),
        ("- 1\n", "p.yaml:1:1: error: expected a FrameworkPolicy mapping; found a list"),
        ("", "p.yaml: error: file holds no YAML documents; expected a FrameworkPolicy"),
        (
            "apiVersion: v1\nkind: Pod\n",
            "p.yaml:1:1: error: expected apiVersion 'mkpolicy.io/v1alpha1' and kind 'FrameworkPolicy'; "
            "found apiVersion 'v1', kind 'Pod' (document 1)",
        ),
    ],
)
def test_malformed_yaml(text: str, expected: str) -> None:
    assert reports(text) == [expected]


def test_yaml_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    (report,) = reports("\n".join(lines) + "\n")
    assert "more than 200000 nodes (after alias expansion)" in report


def test_deep_nesting_is_bounded() -> None:
    (report,) = reports("a: " + "[" * 200 + "]" * 200 + "\n")
    assert "nest" in report and "deeper than 64 levels" in report


def test_all_problems_of_all_files_are_reported(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(HEADER + "spec: {framework: X}\n")
    (tmp_path / "b.yaml").write_text(HEADER + "spec: {framework: PipelineRun.v1.tekton.dev, x: 1}\n")
    with pytest.raises(PolicyError) as info:
        load(tmp_path)
    files = sorted(Path(str(p.location.file)).name for p in info.value.problems)
    assert files == ["a.yaml", "b.yaml"]
    assert str(info.value).startswith(f"{tmp_path}/a.yaml:5:19: 2 problems:")


def test_duplicate_frameworks_across_files(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / f"{name}.yaml").write_text(
            HEADER.replace("tekton", name) + "spec:\n  framework: PipelineRun.v1.tekton.dev\n"
        )
    with pytest.raises(PolicyError) as info:
        load(tmp_path)
    assert info.value.report() == (
        f"{tmp_path}/two.yaml:6:14: error: framework PipelineRun.v1.tekton.dev already has policy 'one' "
        f"(at {tmp_path}/one.yaml:6:14); expected one policy per framework"
    )


def test_directory_skips_objects_and_test_suites(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(HEADER + "spec:\n  framework: PipelineRun.v1.tekton.dev\n")
    (tmp_path / "example.yaml").write_text("apiVersion: tekton.dev/v1\nkind: PipelineRun\nmetadata: {name: x}\n")
    (tmp_path / "p.test.yaml").write_text("apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicyTest\n")
    (tmp_path / "notes.txt").write_text("not yaml")
    # hidden files (a .pre-commit-hooks.yaml is a YAML list) and virtualenvs are not searched
    (tmp_path / ".pre-commit-hooks.yaml").write_text("- id: hook\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env" / "broken.yaml").write_text("- not a policy\n")
    assert [p.name for p in load(tmp_path)] == ["tekton"]


def test_multi_document_file(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(
        "---\n".join(
            HEADER.replace("tekton", name) + f"spec:\n  framework: {fw}\n"
            for name, fw in [("a", "PipelineRun.v1.tekton.dev"), ("b", "Workflow.v1alpha1.argoproj.io")]
        )
    )
    policies = load(path)
    assert [(p.name, p.locate(("spec", "framework")).line) for p in policies] == [("a", 6), ("b", 13)]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.yaml", "no such file or directory"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "directory holds no *.yaml or *.yml files"),
        (
            lambda d: (d / "objs").mkdir() or ((d / "objs" / "o.yaml").write_text("kind: Pod\n") and d / "objs"),
            "directory holds no FrameworkPolicy documents",
        ),
        (lambda d: (d / "bin.yaml").write_bytes(b"\x00\x01\x02") and d / "bin.yaml", "found binary data"),
        (lambda d: (d / "latin.yaml").write_bytes(b"a: \xe9\n") and d / "latin.yaml", "expected UTF-8 text"),
        (
            lambda d: (d / "huge.yaml").write_bytes(b"#" * (9 * 1024 * 1024)) and d / "huge.yaml",
            "file is larger than 8 MiB",
        ),
    ],
    ids=["missing", "empty-dir", "no-policies", "binary", "not-utf8", "huge"],
)
def test_unreadable_input_is_an_input_error(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    with pytest.raises(InputError, match=message.replace("*", r"\*")):
        load(path)


def test_expression_positions_follow_yaml_styles() -> None:
    text = HEADER + textwrap.dedent(
        """\
        spec:
          framework: PipelineRun.v1.tekton.dev
          variables:
            - name: literal
              expression: |
                has(object.spec) ?
                  object.spec.x : 0
            - name: folded
              expression: >-
                has(object.spec) &&
                object.spec.y
            - name: quoted
              expression: "object.spec[\\"z\\"] + 1"
            - name: plain
              expression: object.spec.w
        """
    )
    (policy,) = loads(text, "p.yaml")

    def where(index: int, token: str) -> tuple[int | None, int | None]:
        expr = policy.spec.variables[index].expression
        loc = policy.locate(("spec", "variables", index, "expression"), value=expr, offset=expr.index(token))
        lines = text.splitlines()
        assert loc.line is not None and loc.column is not None
        assert lines[loc.line - 1][loc.column - 1 :].startswith(token.split()[0].split("[")[0])
        return loc.line, loc.column

    assert where(0, "object.spec.x") == (11, 11)
    assert where(1, "object.spec.y") == (15, 9)
    assert where(2, "+ 1") == (17, 39)
    assert where(3, "spec.w") == (19, 26)


@pytest.mark.parametrize(
    ("field", "suggestion"),
    [
        ("frameworks", " (did you mean 'framework'?)"),
        ("faliurePolicy", " (did you mean 'failurePolicy'?)"),
        ("FailurePolicy", " (did you mean 'failurePolicy'?)"),
        ("matchCondition", " (did you mean 'matchConditions'?)"),
        ("variabels", " (did you mean 'variables'?)"),
        ("bogus", ""),
    ],
)
def test_a_misspelled_field_gets_the_closest_valid_one(tmp_path: Path, field: str, suggestion: str) -> None:
    """The suggestion comes before the list of valid fields, so a cut line still shows it."""
    path = tmp_path / "p.yaml"
    path.write_text(
        f"apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {{name: p}}\n"
        f"spec:\n  framework: A.v1.b.c\n  {field}: x\n"
    )
    with pytest.raises(PolicyError) as info:
        load(str(path))
    [problem] = [p for p in info.value.problems if "unknown field" in p.message]
    assert problem.message.startswith(f"unknown field 'spec.{field}'{suggestion}; expected one of: creation, ")
