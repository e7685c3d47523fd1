"""Offline checks of Kubernetes manifests for GPU pods: the API schema (through the optional
``kubernetes-validate`` package, which bundles the schemas) and rules a schema cannot express."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-\d+g\.\d+gb)$")
KNOWN_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig", "feature.node.kubernetes.io/",
                        "kubernetes.io/", "node.kubernetes.io/", "topology.kubernetes.io/", "node-role.kubernetes.io/")
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "m": Decimal("0.001"),
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or unchecked) in a manifest."""

    rule: str
    severity: str
    """"error" (rejects the manifest), "warning", or "info" (something not checked)."""
    where: str
    message: str


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("500m", "32Gi", 8) as a number."""
    text = str(value)
    for suffix, scale in sorted(_SUFFIX.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * Decimal(scale)
    return Decimal(text)


def _pod_spec(doc: dict) -> dict | None:
    spec = doc.get("spec") or {}
    if doc.get("kind") == "Pod":
        return spec
    template = spec.get("jobTemplate", {}).get("spec", spec).get("template") or {}
    return template.get("spec")


def _containers(spec: dict) -> Iterator[tuple[str, dict]]:
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            yield f"{key}[{c.get('name', '?')}]", c


def _gpu_rules(where: str, c: dict) -> Iterator[Problem]:
    res = c.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for name in requests:
        if GPU_RESOURCE.match(name) and name not in limits:
            yield Problem("gpu-in-limits", "error", where, f"{name} only in requests: extended resources go in limits")
    migs = {k: int(v) for k, v in limits.items() if k.startswith("nvidia.com/mig-")}
    if len(migs) > 1:
        yield Problem("one-mig-type", "error", where, f"several MIG types {sorted(migs)} in one container")
    for name, count in migs.items():
        if count > 1:
            yield Problem("one-mig-slice", "error", where,
                          f"{name}: {count}: a CUDA process uses one MIG device; run one container per slice")
    for env in c.get("env") or []:
        if env.get("name") == "CUDA_VISIBLE_DEVICES":
            yield Problem("no-cuda-visible-devices", "error", where,
                          "hard-coded CUDA_VISIBLE_DEVICES overrides the devices the device plugin assigned")


def _qos_rules(where: str, c: dict) -> Iterator[Problem]:
    res = c.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for name in ("cpu", "memory"):
        if name not in limits:
            yield Problem("guaranteed-qos", "error", where, f"no {name} limit: the pod cannot be Guaranteed")
        elif name in requests and quantity(requests[name]) != quantity(limits[name]):
            yield Problem("guaranteed-qos", "error", where,
                          f"{name} request {requests[name]} != limit {limits[name]}: not Guaranteed")
    cpu = limits.get("cpu")
    if cpu is not None and quantity(cpu) % 1:
        yield Problem("integer-cpu", "warning", where,
                      f"cpu {cpu} is fractional: the static CPU manager gives exclusive cores only to integer CPUs")


def _pod_rules(spec: dict) -> Iterator[Problem]:
    containers = list(_containers(spec))
    if not any(GPU_RESOURCE.match(k) for _, c in containers for k in ((c.get("resources") or {}).get("limits") or {})):
        yield Problem("gpu-in-limits", "error", "spec", "no container has nvidia.com/gpu or nvidia.com/mig-* in limits")
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    shm = [m for _, c in containers for m in c.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"]
    if not spec.get("hostIPC") and not any((volumes.get(m.get("name"), {}).get("emptyDir") or {}).get("medium")
                                           == "Memory" for m in shm):
        yield Problem("shm", "warning", "spec.volumes",
                      "no emptyDir {medium: Memory} at /dev/shm: DataLoader workers get the runtime's 64 MiB")
    for key in (spec.get("nodeSelector") or {}):
        if ("nvidia" in key or "gpu" in key) and not key.startswith(KNOWN_LABEL_PREFIXES):
            yield Problem("known-labels", "warning", "spec.nodeSelector",
                          f"{key} is not a GPU Feature Discovery / Node Feature Discovery label")
    for where, c in containers:
        sec = c.get("securityContext") or {}
        if sec.get("privileged"):
            yield Problem("privileged", "warning", where, "privileged: use capabilities.add [IPC_LOCK] and device resources")
        yield from _gpu_rules(where, c)
        yield from _qos_rules(where, c)


def _schema(doc: dict, where: str) -> Iterator[Problem]:
    try:
        import kubernetes_validate
    except ImportError:
        yield Problem("schema", "info", where, "schema not checked: pip install kubernetes-validate")
        return
    try:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError as err:
        path = ".".join(str(p) for p in err.path)
        yield Problem("schema", "error", f"{where}:{path}", err.message)


def validate_manifest(text: str, name: str = "<manifest>") -> list[Problem]:
    """Every problem in a (multi-document) manifest; an empty list or only warnings/info means accepted."""
    try:
        import yaml
    except ImportError as exc:
        raise RuntimeError("validating manifests needs PyYAML: pip install 'aisp[k8s]'") from exc

    problems: list[Problem] = []
    for n, doc in enumerate(d for d in yaml.safe_load_all(text) if d):
        where = f"{name}#{n} {doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
        problems += _schema(doc, where)
        spec = _pod_spec(doc)
        if spec is not None:
            problems += [Problem(p.rule, p.severity, f"{where} {p.where}", p.message) for p in _pod_rules(spec)]
    return problems


def rejected(problems: list[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)
