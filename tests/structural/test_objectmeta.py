"""ObjectMeta validation against the messages of k8s.io/apimachinery v0.36.3
(pkg/api/validation/objectmeta.go, pkg/apis/meta/v1/validation/validation.go,
pkg/api/validate/content/kube.go and dns.go; the expected strings are what that Go code
builds, character for character: RegexError puts two spaces before each "or")."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.structural.objectmeta import object_meta_errors

LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def meta(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "run-1", "namespace": "team-a", **fields}}


@pytest.mark.parametrize(
    ("obj", "errors"),
    [
        (meta(labels={"team": "aero", "acme.io/x": "", "a": "A.b_c-1"}), []),
        (meta(labels={"team": "Aero Team"}), [f'metadata.labels: Invalid value: "Aero Team": {LABEL_VALUE}']),
        (
            meta(labels={"wl": "w" * 64}),
            [f'metadata.labels: Invalid value: "{"w" * 64}": must be no more than 63 bytes'],
        ),
        (meta(labels={"wl": "w" * 63}), []),
        (meta(labels={"-x": "v"}), [f'metadata.labels: Invalid value: "-x": {NAME_PART}']),
        (
            meta(labels={"Acme.io/x": "v"}),
            [f'metadata.labels: Invalid value: "Acme.io/x": prefix part {SUBDOMAIN}'],
        ),
        (meta(labels={"/x": "v"}), ['metadata.labels: Invalid value: "/x": prefix part must be non-empty']),
        # annotation keys are compared in lower case; values are free
        (meta(annotations={"Acme.IO/Note": "Aero Team !"}), []),
        (
            meta(annotations={"a": "x" * (256 * 1024)}),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"],
        ),
        (meta(annotations={"a": "x" * (256 * 1024 - 1)}), []),
        ({"metadata": {"namespace": "team-a"}}, ["metadata.name: Required value: name or generateName is required"]),
        (
            {"metadata": {"name": "Run_1"}},
            [f'metadata.name: Invalid value: "Run_1": {SUBDOMAIN}'],
        ),
        (meta(namespace="a.b"), ['metadata.namespace: Invalid value: "a.b": must not contain dots']),
        (
            {"metadata": {"name": "n" * 254}},
            [f'metadata.name: Invalid value: "{"n" * 254}": must be no more than 253 characters'],
        ),
        (meta(finalizers=["acme.io/cleanup"]), []),
    ],
)
def test_object_meta(obj: dict[str, Any], errors: list[str]) -> None:
    assert [str(e) for e in object_meta_errors(obj)] == errors
