"""Synthetic run folders (summary.json + manifest.json) in the format ``aisp bench run`` writes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aisp.harness.artifacts import atomic_write_json
from aisp.harness.stats import paired_ratio, summarize

ENV = {"hardware_key": "cpu", "gpu_name": None, "gpu_count": 0, "driver": None, "cuda": None,
       "torch": "2.13.0+cpu"}


def samples(median_ms: float, rel_noise: float, n: int = 30, seed: int = 0) -> list[float]:
    """``n`` normally distributed timings around ``median_ms`` with relative spread ``rel_noise``."""
    rng = np.random.default_rng(seed)
    return list(median_ms * (1 + rel_noise * rng.standard_normal(n)))


def variant(name: str, samples_ms: list[float] | None, verdict: str = "ok", **extra: Any) -> dict[str, Any]:
    """A VARIANT record; ``samples_ms=None`` gives one without timing (skipped, failed)."""
    return {"name": name, "file": f"/x/{name}.py", "verdict": verdict, "reason": None,
            "samples_ms": samples_ms or [], "summary": summarize(samples_ms).to_dict() if samples_ms else None,
            "memory": {}, "metrics": {}, "throughput": {}, **extra}


def pair(target: str, baseline: dict[str, Any] | None, variants: list[dict[str, Any]],
         verdict: str = "ok", headline: str = "time", reason: str | None = None) -> dict[str, Any]:
    """A PAIR result; the best variant and speedup come from the samples as the harness does it."""
    group, name = target.split(":")
    timed = [v for v in variants if baseline and baseline["samples_ms"] and v["samples_ms"]]
    for v in timed:
        v["speedup"] = paired_ratio(baseline["samples_ms"], v["samples_ms"]).to_dict()
    best = max(timed, key=lambda v: (v["speedup"]["low"], v["speedup"]["value"])) if timed else None
    return {"target": target, "group": group, "name": name, "files": [], "verdict": verdict,
            "reason": reason, "workload": {"headline": headline}, "baseline": baseline,
            "variants": variants, "best": best["name"] if best else None,
            "speedup": best["speedup"] if best else None}


def write_run(root: Path, run_id: str, results: list[dict[str, Any]], env: dict[str, Any] | None = ENV,
              verify_only: bool = False) -> Path:
    """``root/<run_id>/summary.json`` (+ ``manifest.json`` unless ``env`` is None)."""
    run_dir = root / run_id
    atomic_write_json(run_dir / "summary.json", {
        "run_id": run_id, "hardware_key": (env or ENV)["hardware_key"],
        "options": {"verify_only": verify_only}, "results": results})
    if env is not None:
        atomic_write_json(run_dir / "manifest.json", dict(env))
    return run_dir


@dataclass(frozen=True)
class NoisyPair:
    """Unchanged code timed in separate runs: each run moves both variants' medians by a common
    factor (clocks, temperature) and each by its own (placement, library heuristics), then draws
    samples around them."""

    baseline_ms: float
    speedup: float
    run_to_run: float
    """Std of the log change between two runs of each median time and of their ratio."""
    within_run: float
    """Coefficient of variation of the samples inside one run."""

    def run(self, rng: np.random.Generator, slowdown: float = 1.0, n: int = 20) -> tuple[list[float], list[float]]:
        """(baseline, optimized) samples of one run; ``slowdown`` multiplies the optimized time."""
        common, own_base, own_opt = rng.normal(0.0, self.run_to_run / 2, 3)
        base = self.baseline_ms * math.exp(common + own_base)
        opt = self.baseline_ms / self.speedup * math.exp(common + own_opt) * slowdown
        return (list(base * (1 + self.within_run * rng.standard_normal(n))),
                list(opt * (1 + self.within_run * rng.standard_normal(n))))


def noisy_pairs(count: int, rng: np.random.Generator, run_to_run: tuple[float, float],
                within_run: tuple[float, float] = (0.01, 0.03)) -> list[NoisyPair]:
    """Baselines of 20 us to 50 ms, speedups of 1.1x to 10x (log-uniform), noise uniform in the ranges."""
    def log_uniform(low: float, high: float) -> float:
        return float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return [NoisyPair(log_uniform(0.02, 50), log_uniform(1.1, 10), float(rng.uniform(*run_to_run)),
                      float(rng.uniform(*within_run))) for _ in range(count)]
