"""Synthetic artifacts for the dashboard: several H200 runs over a few commits (pairs with stored
expectations in this repository, roofline annotations, a throttle note, a busy-host note, verdicts
the dashboard does not know), each pair with results, a log and a profile file, as ``aisp bench
run`` lays them out. The timings are invented: they exercise the pages, they are not measurements.

``python tests/dashboard_runs.py DIR`` writes them to DIR (used for the screenshot in docs/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from aisp.harness.artifacts import atomic_write_json, atomic_write_text
from aisp.harness.stats import paired_ratio, summarize
from aisp.report.roofline import annotate
from aisp.report.tables import write_tables

PEAKS = {"measurements": {"matmul_bf16": {"value": 700.0}, "matmul_fp32": {"value": 50.0},
                          "memory_copy": {"value": 4000.0}}}
H200 = {"hardware_key": "h200", "gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "580.159.04",
        "cuda": "13.0", "torch": "2.11.0+cu130", "cpu_model": "AMD EPYC 9534", "numa_nodes": 2,
        "power_limit_w": 700, "persistence_mode": True, "ecc": True, "mig": False, "hostname": "gpu-node-3"}
# (target, baseline ms, speedup, flops, bytes, extra variant speedup or None, verdict override)
PAIRS = [("ch13:training_standard", 40.0, 1.35, 4e12, 6e9, None, None),
         ("ch13:matmul_pytorch", 12.0, 14.5, 1.1e12, 1.6e8, 7.0, None),
         ("ch01:batch_size", 3.0, 6.85, 1.7e10, 3.7e7, None, None),
         ("ch16:gpu_sampling", 50.0, 23.3, None, None, None, None),
         ("ch16:async_scheduling", 8.0, 1.01, None, None, None, "inconclusive"),
         ("ch10:wgmma_gemm", 2.0, 2.18, 5.5e11, 1e8, None, None),
         ("ch10:persistent_matmul", 1.5, 0.92, 2.2e11, 5e7, None, "slower")]
COMMITS = ["3f1c2a9b7d", "8e2d4c1a55", "c6ce358623", "d41d8cd98f"]


def _variant(name: str, samples: list[float], workload: dict[str, Any], verdict: str = "ok") -> dict[str, Any]:
    var = {"name": name, "file": f"/repo/{name}.py", "verdict": verdict, "reason": None, "samples_ms": samples,
           "host_samples_ms": [s * 0.2 for s in samples], "summary": summarize(samples).to_dict(),
           "memory": {"peak_bytes": int(2e9)}, "metrics": {}, "throttled_samples": {}, "throughput": {}}
    var["roofline"] = annotate(var, workload, PEAKS) if workload.get("flops") else None
    return var


def _pair(spec: tuple, rng: np.random.Generator, drift: float) -> dict[str, Any]:
    target, base_ms, speedup, flops, nbytes, alt, verdict = spec
    group, name = target.split(":")
    workload = {"headline": "time", "flops": flops, "bytes": nbytes, "precision": "bf16"}
    base = list(base_ms * (1 + 0.02 * rng.standard_normal(40)))
    opt_ms = base_ms / (speedup * drift)
    variants = [_variant(f"optimized_{name}", list(opt_ms * (1 + 0.03 * rng.standard_normal(40))), workload)]
    if alt:
        variants.append(_variant(f"optimized_{name}_alt", list(base_ms / alt * (1 + 0.03 * rng.standard_normal(40))),
                                 workload))
    for var in variants:
        var["speedup"] = paired_ratio(base, var["samples_ms"]).to_dict()
        var["verdict"] = verdict or "ok"
    best = max(variants, key=lambda v: v["speedup"]["value"])
    return {"target": target, "group": group, "name": name, "files": [f"/repo/{group}/baseline_{name}.py"],
            "verdict": verdict or "ok", "reason": "interval holds 1" if verdict == "inconclusive" else None,
            "workload": workload, "baseline": _variant(f"baseline_{name}", base, workload), "variants": variants,
            "best": best["name"], "speedup": best["speedup"], "notes": [], "telemetry": {},
            "expectation": {"status": "ok", "detail": "within the stored runs' spread", "hardware_key": "h200"}}


def _extras(results: list[dict[str, Any]], index: int) -> None:
    """A throttle note, a busy host, a skipped pair and a verdict no table knows."""
    results[0]["telemetry"] = {"throttle_reasons_seen": ["sw_power_cap"]}
    results[0]["notes"] = ["optimized_training_standard: 3 of 40 samples throttled (sw_power_cap)"]
    results[2]["expectation"] = {"status": "not-compared", "detail": "host busy: load average 14.2 on 16 cores",
                                 "hardware_key": "h200"}
    results.append({"target": "ch13:precisionfp8_te", "group": "ch13", "name": "precisionfp8_te",
                    "verdict": "skipped", "reason": "needs transformer_engine", "workload": {}, "baseline": None,
                    "variants": [], "best": None, "speedup": None})
    if index == len(COMMITS) - 1:
        results[3]["verdict"] = "a-verdict-added-later"


def write_runs(root: Path, count: int = len(COMMITS)) -> list[Path]:
    """``count`` H200 run folders under ``root``, a day apart; returns them oldest first."""
    rng = np.random.default_rng(7)
    folders = []
    for i in range(count):
        run_dir = root / f"202611{20 + i:02d}-0900{i:02d}"
        results = [_pair(spec, rng, 1 + 0.03 * rng.standard_normal()) for spec in PAIRS]
        _extras(results, i)
        atomic_write_json(run_dir / "manifest.json", {**H200, "git_commit": COMMITS[i % len(COMMITS)] + "0" * 30,
                                                      "git_dirty": i == 2, "command_line": ["aisp", "bench", "run"]})
        atomic_write_json(run_dir / "summary.json", {"run_id": run_dir.name, "hardware_key": "h200",
                                                     "options": {"verify_only": False}, "results": results})
        for result in results:
            folder = run_dir / f"{result['group']}_{result['name']}"
            atomic_write_json(folder / "results" / "benchmark_test_results.json", result)
            atomic_write_text(folder / "logs" / "pair.log", f"{result['target']}: {result['verdict']}\n")
            atomic_write_text(folder / "profiles" / "trace_summary.txt", "top kernels: (synthetic)\n")
        write_tables(run_dir, results)
        folders.append(run_dir)
    return folders


if __name__ == "__main__":
    for folder in write_runs(Path(sys.argv[1])):
        print(folder)
