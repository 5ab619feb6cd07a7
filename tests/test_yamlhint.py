"""YAML syntax errors say what to fix, with a hint about indentation, at the right position."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkpolicy.check import check_paths

HEAD = "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata:\n  name: x\nspec:\n"


@pytest.mark.parametrize(
    ("body", "position", "message"),
    [
        (
            "  framework: A.v1.b.c\n   creation: {}\n",
            "7:12",
            "malformed YAML: a ':' where no mapping can start (a 'key: value' inside a plain value needs quotes, or "
            "this line is indented deeper than the key it belongs to) [YAML: mapping values are not allowed here]; "
            "check the indentation: line 7 starts at column 4, the line before at column 3 (indent with spaces, "
            "the same number for every key of one mapping)",
        ),
        (
            "  framework: A.v1.b.c\n  creation:\n    patches:\n    - type: JSONPatch\n     jsonPatch: {}\n",
            "10:6",
            "malformed YAML: this line does not line up with the lines before it at its level [YAML: expected "
            "<block end>, but found '<block mapping start>']; check the indentation: line 10 starts at column 6, "
            "the line before at column 5 (indent with spaces, the same number for every key of one mapping)",
        ),
        (
            "\tframework: A.v1.b.c\n",
            "6:1",
            "malformed YAML: a tab: YAML indents with spaces only [YAML: found character '\\t' that cannot start "
            "any token]",
        ),
        (
            "  framework: [A.v1.b.c\n",
            "7:1",
            "malformed YAML: a '[' that is not closed by ']' (or a missing ',' between items) [YAML: expected ',' "
            "or ']', but got '<stream end>']",
        ),
        # Nesting under "key:" is not an indentation problem: no indentation hint.
        (
            "  framework: a: b\n",
            "6:15",
            "malformed YAML: a ':' where no mapping can start (a 'key: value' inside a plain value needs quotes, or "
            "this line is indented deeper than the key it belongs to) [YAML: mapping values are not allowed here]",
        ),
    ],
    ids=["deeper-key", "list-item-key", "tab", "unclosed-flow", "colon-in-value"],
)
def test_yaml_errors_in_plain_words(tmp_path: Path, body: str, position: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + body)
    (finding,) = check_paths([str(path)]).findings
    assert (f"{finding.line}:{finding.column}", finding.rule, finding.message) == (position, "MKP101", message)
