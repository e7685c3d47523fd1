"""Offline validation of the chapter's Kubernetes manifests: both accepted, and every planted mistake
rejected by the rule (or the schema) meant to catch it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.system.manifests import quantity, rejected, validate_manifest

CH03 = Path(__file__).parents[1] / "ch03"
MANIFESTS = ["kubernetes_mig_pod.yaml", "kubernetes_topology_pod.yaml"]


def load(name: str) -> dict:
    return yaml.safe_load((CH03 / name).read_text())


def first(doc: dict) -> dict:
    return doc["spec"]["containers"][0]


def problems_after(name: str, mutate: Callable[[dict], None]) -> list:
    doc = load(name)
    mutate(doc)
    return validate_manifest(yaml.safe_dump(doc), name)


@pytest.mark.parametrize("name", MANIFESTS)
def test_chapter_manifests_are_clean(name: str) -> None:
    problems = validate_manifest((CH03 / name).read_text(), name)
    assert [p for p in problems if p.severity != "info"] == []


def _gpu_to_requests(doc: dict) -> None:
    res = first(doc)["resources"]
    res["requests"]["nvidia.com/gpu"] = res["limits"].pop("nvidia.com/gpu")


def _unequal_cpu(doc: dict) -> None:
    first(doc)["resources"]["requests"]["cpu"] = "24"


def _no_memory_limit(doc: dict) -> None:
    del first(doc)["resources"]["limits"]["memory"]


def _cuda_visible(doc: dict) -> None:
    first(doc).setdefault("env", []).append({"name": "CUDA_VISIBLE_DEVICES", "value": "0,1"})


def _two_slices(doc: dict) -> None:
    first(doc)["resources"]["limits"]["nvidia.com/mig-3g.71gb"] = 2


def _two_mig_types(doc: dict) -> None:
    first(doc)["resources"]["limits"]["nvidia.com/mig-1g.18gb"] = 1


@pytest.mark.parametrize("name, mutate, rule", [
    ("kubernetes_topology_pod.yaml", _gpu_to_requests, "gpu-in-limits"),
    ("kubernetes_topology_pod.yaml", _unequal_cpu, "guaranteed-qos"),
    ("kubernetes_topology_pod.yaml", _no_memory_limit, "guaranteed-qos"),
    ("kubernetes_topology_pod.yaml", _cuda_visible, "no-cuda-visible-devices"),
    ("kubernetes_mig_pod.yaml", _two_slices, "one-mig-slice"),
    ("kubernetes_mig_pod.yaml", _two_mig_types, "one-mig-type"),
])
def test_planted_mistake_is_rejected(name: str, mutate: Callable[[dict], None], rule: str) -> None:
    problems = problems_after(name, mutate)
    assert rejected(problems)
    assert rule in {p.rule for p in problems if p.severity == "error"}


def _no_shm(doc: dict) -> None:
    del doc["spec"]["volumes"], first(doc)["volumeMounts"]


def _fractional_cpu(doc: dict) -> None:
    first(doc)["resources"]["limits"]["cpu"] = "47.5"
    del first(doc)["resources"]["requests"]["cpu"]


def _unknown_label(doc: dict) -> None:
    doc["spec"]["nodeSelector"]["gpu.nvidia.com/nvlink-domain"] = "a"


def _privileged(doc: dict) -> None:
    first(doc)["securityContext"]["privileged"] = True


@pytest.mark.parametrize("mutate, rule", [(_no_shm, "shm"), (_fractional_cpu, "integer-cpu"),
                                          (_unknown_label, "known-labels"), (_privileged, "privileged")])
def test_planted_warning_is_reported(mutate, rule: str) -> None:
    problems = problems_after("kubernetes_topology_pod.yaml", mutate)
    assert rule in {p.rule for p in problems if p.severity == "warning"}


def test_pod_without_gpu_is_rejected() -> None:
    problems = problems_after("kubernetes_mig_pod.yaml", lambda d: [
        c["resources"]["limits"].pop("nvidia.com/mig-3g.71gb") for c in d["spec"]["containers"]])
    assert "gpu-in-limits" in {p.rule for p in problems if p.severity == "error"}


def test_schema_rejects_fields_the_api_does_not_have() -> None:
    pytest.importorskip("kubernetes_validate")
    bad_field = problems_after("kubernetes_topology_pod.yaml",
                               lambda d: d["spec"].update(topologyManager={"policy": "single-numa-node"}))
    assert any(p.rule == "schema" and "topologyManager" in p.message for p in bad_field)
    typo = problems_after("kubernetes_mig_pod.yaml", lambda d: first(d).update(resource=first(d).pop("resources")))
    assert any(p.rule == "schema" and p.severity == "error" for p in typo)


def test_without_schema_package_the_gap_is_reported(monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_kv(name, *args, **kwargs):
        if name == "kubernetes_validate":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_kv)
    problems = validate_manifest((CH03 / MANIFESTS[0]).read_text())
    assert [(p.rule, p.severity) for p in problems] == [("schema", "info")]


def test_quantities() -> None:
    assert quantity("500m") * 2 == 1 and quantity("32Gi") == 32 * 2**30 and quantity(8) == 8
    assert quantity("1G") == 10**9


def test_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["system", "manifest", *[str(CH03 / m) for m in MANIFESTS]])
    assert ok.exit_code == 0, ok.output
    bad = tmp_path / "bad.yaml"
    doc = load(MANIFESTS[1])
    _cuda_visible(doc)
    bad.write_text(yaml.safe_dump(doc))
    res = runner.invoke(app, ["system", "manifest", str(bad)])
    assert res.exit_code == 1 and "rejected" in res.output
