"""What the serving ``mkpolicy dev`` tools share: the CRD files ``--crd`` names, the kubeconfig folder.
(Running until interrupted is tested through the tools: tests/testing/test_cli.py, test_dev_multikueue.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from mkpolicy.cli.dev_serve import crd_files, kubeconfig_dir, kubeconfig_lines


def test_crd_files_are_files_as_given_and_directories_as_their_yaml(tmp_path: Path) -> None:
    folder = tmp_path / "crds"
    folder.mkdir()
    for name in ("b.yml", "a.yaml", "notes.txt"):
        (folder / name).write_text("")
    single = str(tmp_path / "one.yaml")
    assert crd_files([single, str(folder)]) == [single, str(folder / "a.yaml"), str(folder / "b.yml")]


def test_a_directory_without_yaml_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(FileNotFoundError, match=r"a directory without \*\.yaml or \*\.yml files"):
        crd_files([str(tmp_path)])


def test_a_given_kubeconfig_dir_loses_only_the_kubeconfigs_written_into_it(tmp_path: Path) -> None:
    out = tmp_path / "made" / "here"
    out.mkdir(parents=True)
    (out / "old.kubeconfig").write_text("kept")
    with kubeconfig_dir(str(out)) as path:
        assert path == out
        (path / "manager.kubeconfig").write_text("")
        (path / "notes.txt").write_text("")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "old.kubeconfig"]


def test_a_missing_kubeconfig_dir_is_made(tmp_path: Path) -> None:
    with kubeconfig_dir(str(tmp_path / "new" / "dir")) as path:
        assert path.is_dir()


def test_without_a_kubeconfig_dir_a_temporary_one_is_removed(tmp_path: Path) -> None:
    with kubeconfig_dir(None) as path:
        assert path.is_dir() and path.name.startswith("mkpolicy-multikueue-")
        (path / "manager.kubeconfig").write_text("")
    assert not path.exists()


def test_kubeconfig_lines() -> None:
    files = {"manager": Path("/k/manager.kubeconfig"), "worker1": Path("/k/worker1.kubeconfig")}
    assert kubeconfig_lines(files) == ["manager: /k/manager.kubeconfig", "worker1: /k/worker1.kubeconfig"]
