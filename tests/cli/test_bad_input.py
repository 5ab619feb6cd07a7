"""Bad input through the CLI: clear errors, exit code 2, bounded time and memory.

Each case runs ``mkpolicy`` in a child process limited to 1 GiB of address space, so a
YAML bomb that expanded would fail with MemoryError instead of passing.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

MEMORY_LIMIT = 1024 * 1024 * 1024
TIME_LIMIT = 30.0  # generous: refused in about a second on a quiet machine; unbounded, these run for minutes
HEADER = "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata:\n  name: x\nspec:\n  framework: X.v1.example.com\n"


def _limit() -> None:  # runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


# Linux capabilities that let root read any file whatever its mode (linux/capability.h, linux/prctl.h).
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _limit_as_root_without_dac() -> Callable[[], None]:
    """A ``preexec_fn``: ``_limit``, then drop the capabilities that let root ignore file modes.

    Switching to another user would not do: the interpreter may live where only root can
    reach it (~root/.pyenv). Root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH is held
    to a file's owner bits, so a mode-0 file is unreadable even to it. They are dropped from
    the bounding set (root's exec regains everything in it), the inheritable and ambient sets.
    libc is loaded here, in the parent: the child only calls it.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    capget, capset, prctl = libc.capget, libc.capset, libc.prctl
    dac = (1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)

    def check(result: int, call: str) -> None:
        if result != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"{call}: {os.strerror(errno)}")

    def preexec() -> None:  # runs in the child
        _limit()
        header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}: capabilities 0-31, 32-63
        check(capget(header, data), "capget")
        for i in range(3):
            data[i] &= ~dac
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):  # needs CAP_SETPCAP (kept: only the DAC bits go)
            check(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "prctl(PR_CAPBSET_DROP)")
        check(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
        check(capset(header, data), "capset")

    return preexec


def mkpolicy(*argv: str, cwd: Path, preexec: Callable[[], None] = _limit) -> tuple[int, str, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkpolicy", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=preexec,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start


def bomb(levels: int = 9) -> str:
    lines = ['    a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    return HEADER + "  params:\n" + "\n".join(lines) + "\n"


def _write(name: str, content: str | bytes) -> Callable[[Path], str]:
    def make(d: Path) -> str:
        path = d / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return name

    return make


def _dir(name: str, files: dict[str, str]) -> Callable[[Path], str]:
    def make(d: Path) -> str:
        (d / name).mkdir()
        for file, text in files.items():
            (d / name / file).write_text(text)
        return name

    return make


def _nested_block(depth: int) -> str:
    return (
        HEADER
        + "  params:\n"
        + "".join("    " + "  " * i + f"k{i}:\n" for i in range(depth))
        + "    "
        + "  " * depth
        + "x: 1\n"
    )


CASES = [
    ("missing", lambda d: "missing.yaml", "missing.yaml: error: no such file or directory"),
    ("empty-dir", _dir("empty", {}), "empty: error: directory holds no *.yaml or *.yml files"),
    (
        "dir-without-policies",
        _dir("objs", {"pod.yaml": "apiVersion: v1\nkind: Pod\n"}),
        "objs: error: directory holds no FrameworkPolicy documents",
    ),
    (
        "binary",
        _write("bin.yaml", b"\x7fELF\x00\x01\x02"),
        "bin.yaml: error: expected a YAML text file, found binary data (NUL bytes)",
    ),
    (
        "not-utf8",
        _write("latin.yaml", b"a: \xe9t\xe9\n"),
        "latin.yaml:1: error: expected UTF-8 text, found an invalid byte at offset 3",
    ),
    (
        "yaml-bomb",
        _write("bomb.yaml", bomb()),
        "error: document 1: the YAML stream has more than 200000 nodes (after alias expansion)",
    ),
    (
        "deep-flow",
        _write("deep.yaml", HEADER + "  params: " + "[" * 5000 + "]" * 5000 + "\n"),
        "deep.yaml:7: error: document nests deeper than 64 levels",
    ),
    (
        "deep-block",
        _write("deep.yaml", _nested_block(80)),
        "deep.yaml:70:129: error: document nests deeper than 64 levels",
    ),
    ("huge", _write("huge.yaml", "#" * (9 * 1024 * 1024)), "huge.yaml: error: file is larger than 8 MiB"),
    # In a directory, files are first screened with libyaml's composer, which would overflow
    # the C stack (a segfault) on this: the screen bounds the depth first.
    (
        "deep-block-in-directory",
        _dir("objs", {"deep.yaml": "- " * 45_000 + "x\n"}),
        "objs/deep.yaml:1:129: error: document nests deeper than 64 levels",
    ),
    (
        "many-nodes",
        _write("many.yaml", HEADER + "  params:\n    l:\n" + "    - x\n" * 60_000),
        "many.yaml:49989:7: error: the YAML stream has more than 50000 nodes; policy files and test suites are small",
    ),
]


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lint_rejects_bad_input(tmp_path: Path, make: Callable[[Path], str], message: str) -> None:
    path = make(tmp_path)
    code, output, elapsed = mkpolicy("lint", path, cwd=tmp_path)
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output
    assert elapsed < TIME_LIMIT


@pytest.mark.parametrize(
    ("argv", "make", "message"),
    [
        (["test"], _write("bomb.test.yaml", bomb()), "the YAML stream has more than 200000 nodes"),
        (["test"], _write("bin.test.yaml", b"\x00\x00"), "found binary data"),
        (["explain"], _write("bomb.yaml", bomb()), "the YAML stream has more than 200000 nodes"),
        (
            ["export", "rbac", "--policies"],
            _write("deep.yaml", HEADER + "  params: " + "{a: " * 300 + "1" + "}" * 300 + "\n"),
            "nests deeper than 64 levels",
        ),
        (["validate"], _write("huge.yaml", "#" * (9 * 1024 * 1024)), "file is larger than 8 MiB"),
        (
            ["validate"],
            _dir("objs", {"deep.yaml": "- " * 45_000 + "x\n"}),
            "deep.yaml:1:129: error: document nests deeper than 64 levels",
        ),
    ],
    ids=["test-bomb", "test-binary", "explain-bomb", "export-deep", "validate-huge", "validate-deep-in-directory"],
)
def test_other_commands_reject_bad_input(
    tmp_path: Path, argv: list[str], make: Callable[[Path], str], message: str
) -> None:
    path = make(tmp_path)
    code, output, elapsed = mkpolicy(*argv, path, cwd=tmp_path)
    assert code == 2, output
    assert message in output
    assert elapsed < TIME_LIMIT


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(HEADER)
    path.chmod(0)
    preexec = _limit
    if os.geteuid() == 0:  # root reads files whatever their mode: run the child without that power
        if not sys.platform.startswith("linux"):
            pytest.skip("root reads files whatever their mode (dropping that power is Linux-only here)")
        try:
            preexec = _limit_as_root_without_dac()
            probe = subprocess.run(
                [sys.executable, "-c", "open('secret.yaml').close()"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
                preexec_fn=preexec,
            )
        except (subprocess.SubprocessError, OSError, AttributeError) as exc:  # no CAP_SETPCAP, no capget/capset...
            pytest.skip(f"root reads files whatever their mode, and cannot drop that power here: {exc}")
        # The child really cannot read the file (else the test below would prove nothing).
        assert probe.returncode == 1 and "PermissionError" in probe.stderr, probe.stderr
    code, output, _ = mkpolicy("lint", "secret.yaml", cwd=tmp_path, preexec=preexec)
    assert code == 2, output
    assert output == (
        "secret.yaml: error: cannot read file: Permission denied\n0 errors, 0 warnings in 0 files (0 policies)\n"
    )


def _object_bomb(levels: int = 9) -> str:
    """A Kubernetes object whose labels hold a YAML bomb (10**levels strings expanded)."""
    return "apiVersion: tekton.dev/v1\nkind: PipelineRun\nmetadata:\n  name: x\nspec:\n" + bomb(levels).split(
        "  params:\n", 1
    )[1].replace("    a", "  a")


OBJECT_CASES = [
    (
        ["apply", "--policy", "{policies}", "--phase", "create", "-f", "bomb.yaml"],
        "expands to more than 2,000,000 nodes",
    ),
    (["eval", "object.spec", "--var", "object=bomb.yaml"], "--var object: the YAML stream expands to more than"),
    (["eval", "1", "--schema", "object=bomb.yaml"], "bomb.yaml:1:1: cannot parse schema file: the YAML stream expands"),
]


@pytest.mark.parametrize(("argv", "message"), OBJECT_CASES, ids=["apply", "eval-var", "eval-schema"])
def test_object_files_are_bounded(tmp_path: Path, argv: list[str], message: str) -> None:
    (tmp_path / "bomb.yaml").write_text(_object_bomb())
    policies = str(Path(__file__).resolve().parents[2] / "policies" / "tekton-pipelinerun.yaml")
    code, output, elapsed = mkpolicy(*(a.format(policies=policies) for a in argv), cwd=tmp_path)
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output
    assert elapsed < TIME_LIMIT


def test_lint_reports_a_schema_bomb(tmp_path: Path) -> None:
    (tmp_path / "crd.yaml").write_text(_object_bomb())
    (tmp_path / "p.yaml").write_text(HEADER + "  schema: crd.yaml\n  managedBy:\n    path: /spec/managedBy\n")
    code, output, elapsed = mkpolicy("lint", "p.yaml", cwd=tmp_path)
    assert (
        "MKP107 spec.schema 'crd.yaml' (crd.yaml:1:1): cannot parse schema file: the YAML stream expands" in output
    ), output
    assert code == 1
    assert elapsed < TIME_LIMIT
