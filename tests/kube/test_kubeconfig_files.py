"""A followed kubeconfig: parsed again only when its bytes, or those of a file it names, change."""

from __future__ import annotations

from pathlib import Path

import yaml

from mkpolicy.kube.kubeconfig import KubeconfigFiles, load_kubeconfig, named_files


def kubeconfig(cert: str, ca: str = "/abs/ca.crt") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://m:6443", "certificate-authority": ca}}],
        "users": [{"name": "u", "user": {"client-certificate": cert, "client-key": "tls.key", "token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def test_named_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    assert named_files(kubeconfig("tls.crt"), str(tmp_path)) == [
        "/abs/ca.crt",
        str(tmp_path / "tls.crt"),
        str(tmp_path / "tls.key"),
    ]
    assert named_files({"users": ["odd", {"user": None}], "clusters": None}, None) == []


def test_a_change_of_the_kubeconfig_or_of_a_file_it_names_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    ca = tmp_path / "ca.crt"
    ca.write_text("ca")
    path.write_text(yaml.safe_dump(kubeconfig("tls.crt", str(ca))))
    (tmp_path / "tls.crt").write_text("cert 1")
    (tmp_path / "tls.key").write_text("key 1")
    files = KubeconfigFiles(str(path))
    first = files.snapshot()
    assert not files.unchanged(first)  # never parsed
    files.taken(first, load_kubeconfig(str(path)))
    # the snapshot read before the parse did not include the named files: read once more, then stable
    second = files.snapshot()
    assert not files.unchanged(second)
    files.taken(second, load_kubeconfig(str(path)))
    assert files.unchanged(files.snapshot())
    (tmp_path / "tls.crt").write_text("cert 2")  # a rotated client certificate
    rotated = files.snapshot()
    assert not files.unchanged(rotated)
    files.taken(rotated, load_kubeconfig(str(path)))
    assert files.unchanged(files.snapshot())
    path.write_text(yaml.safe_dump(kubeconfig("other.crt", str(ca))))  # the kubeconfig itself
    assert not files.unchanged(files.snapshot())
    (tmp_path / "tls.key").unlink()  # unreadable: never "unchanged" (the parse reports why)
    assert files.snapshot() is None and not files.unchanged(None)
