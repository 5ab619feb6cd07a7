"""``metav1.LabelSelector`` as ``LabelSelectorAsSelector`` + ``Matches`` (k8s.io/apimachinery), and
Kueue's Configuration as ``apis/config/v1beta2/defaults.go`` defaults it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.errors import MkpolicyError
from mkpolicy.kube import kueueconfig
from mkpolicy.kube.labelselector import both, excluding, parse

SYSTEM = excluding(("kube-system", "kueue-system"))


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ({}, {}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        ({"matchLabels": {"team": "a"}}, {}, False),
        (SYSTEM, {"kubernetes.io/metadata.name": "kube-system"}, False),
        (SYSTEM, {"kubernetes.io/metadata.name": "team-a"}, True),
        (SYSTEM, {}, True),  # NotIn selects an absent label
        ({"matchExpressions": [{"key": "k", "operator": "In", "values": ["1", "2"]}]}, {"k": "2"}, True),
        ({"matchExpressions": [{"key": "k", "operator": "Exists"}]}, {"k": ""}, True),
        ({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {"k": ""}, False),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
    ],
)
def test_matches(selector: dict[str, Any], labels: dict[str, str], selected: bool) -> None:
    assert parse(selector, "s").matches(labels) is selected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("team=a", "s: expected a label selector (matchLabels, matchExpressions); found 'team=a'"),
        ({"matchLabel": {}}, "s: expected matchLabels and matchExpressions only; found matchLabel"),
        ({"matchLabels": {"a": 1}}, "s.matchLabels[a]: expected a string value; found 1"),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         "s.matchExpressions[0].operator: expected one of In, NotIn, Exists, DoesNotExist; found 'Gt'"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]},
         "s.matchExpressions[0].values: expected at least one value for operator In; found none"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         "s.matchExpressions[0].values: expected no values for operator Exists; found ['x']"),
    ],
)  # fmt: skip
def test_malformed_selectors_say_what_was_expected(selector: Any, message: str) -> None:
    with pytest.raises(MkpolicyError) as err:
        parse(selector, "s")
    assert str(err.value) == message


def test_both_selects_what_each_selects() -> None:
    team = {"matchLabels": {"team": "a"}}
    combined = both(SYSTEM, team)
    assert combined == {"matchLabels": {"team": "a"}, "matchExpressions": SYSTEM["matchExpressions"]}
    assert both(SYSTEM, SYSTEM) == SYSTEM  # the same requirement once
    assert both(None, team) == team and both(team, None) == team and both(None, None) is None
    clash = parse(both(team, {"matchLabels": {"team": "b"}}), "s")
    assert not clash.matches({"team": "a"}) and not clash.matches({"team": "b"})


def test_kueue_defaults() -> None:
    config = kueueconfig.KueueConfig()
    assert config.version == "v0.19.2" and config.manage_jobs_without_queue_name is False
    # defaults.go: managedJobsNamespaceSelector leaves out kube-system and Kueue's namespace.
    assert config.selector == SYSTEM
    assert kueueconfig.KueueConfig(namespace="kueue").selector == excluding(("kube-system", "kueue"))
    assert config.gate("ManagedJobsNamespaceSelectorAlwaysRespected")
    old = kueueconfig.KueueConfig(
        version="v0.17.1", feature_gates={"ManagedJobsNamespaceSelectorAlwaysRespected": False}
    )
    assert not old.gate("ManagedJobsNamespaceSelectorAlwaysRespected") and not old.at_least(0, 18)
    locked = kueueconfig.KueueConfig(feature_gates={"ManagedJobsNamespaceSelectorAlwaysRespected": False})
    assert locked.gate("ManagedJobsNamespaceSelectorAlwaysRespected")  # GA and locked in 0.19


def test_kueue_configuration_file(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kq",
        "manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": {"matchLabels": {"kueue": "on"}},
        "integrations": {"labelKeysToCopy": ["team"]}, "waitForPodsReady": {"timeout": "5m"},
        "featureGates": {"ShortWorkloadNames": True},
    }  # fmt: skip
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)},
    }
    for name, text in (("config.yaml", doc), ("cm.yaml", configmap)):
        (tmp_path / name).write_text(yaml.safe_dump(text))
        config = kueueconfig.load(str(tmp_path / name), version="v0.17.1")
        assert (config.version, config.namespace, config.manage_jobs_without_queue_name) == ("v0.17.1", "kq", True)
        assert config.selector == {"matchLabels": {"kueue": "on"}}
        assert (
            config.label_keys_to_copy == {"team"} and config.wait_for_pods_ready and config.gate("ShortWorkloadNames")
        )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Deployment"}, "f: expected a Kueue Configuration (kind: Configuration); found 'Deployment'"),
        ({"kind": "Configuration", "apiVersion": "v1"},
         "f: expected apiVersion config.kueue.x-k8s.io/v1beta1 or v1beta2; found 'v1'"),
        ({"kind": "Configuration", "apiVersion": "config.kueue.x-k8s.io/v1beta2", "managedJobsNamespaceSelector": []},
         "f: managedJobsNamespaceSelector: expected a label selector (matchLabels, matchExpressions); found []"),
    ],
)  # fmt: skip
def test_malformed_configurations(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(MkpolicyError) as err:
        kueueconfig.from_configuration(doc, where="f")
    assert str(err.value) == message
    with pytest.raises(MkpolicyError, match="expected vMAJOR.MINOR"):
        kueueconfig.KueueConfig(version="latest")
