"""A/A noise calibration: each variant timed against itself, within one run.

The half-widths are stored per pair as ``noise`` and act as one more floor under the regression
limits; they are not the run-to-run noise (separate runs move more than one run's spread), which
comes from the expectations' history (:mod:`aisp.judge.run_noise`).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from aisp.harness import environment
from aisp.harness.artifacts import new_run_dir, write_pair
from aisp.harness.discovery import Pair
from aisp.harness.options import RunOptions
from aisp.harness.results import TIMED
from aisp.harness.runner import PACKAGE_PARENT, Budget, run_pair
from aisp.judge import expectations


def _aa(pair: Pair, file, options: RunOptions, run_dir) -> dict[str, Any]:
    twin = replace(pair, name=f"{pair.name}__aa_{file.stem}", baseline=file, optimized=(file,))
    result = run_pair(twin, options, run_dir, Budget(options.timeout_multiplier))
    write_pair(run_dir, result)
    return result


def calibrate(pairs: list[Pair], options: RunOptions) -> list[dict[str, Any]]:
    """Run baseline-vs-baseline and optimized-vs-optimized per pair; store the noise floors.

    The floor of a pair's speedup combines the two A/A relative half-widths in quadrature.
    """
    run_dir = new_run_dir(options.artifacts_dir)
    env = environment.manifest(PACKAGE_PARENT, options.to_dict())
    rows = []
    for pair in pairs:
        widths: dict[str, float] = {}
        for file in (pair.baseline, pair.optimized[0]):
            result = _aa(pair, file, options, run_dir)
            key = expectations.key_for(result, env)
            if result["verdict"] not in TIMED or not result.get("speedup"):
                rows.append({"target": pair.target, "file": file.name, "verdict": result["verdict"],
                             "reason": result.get("reason")})
                break
            ratio = result["speedup"]
            widths[file.stem] = (ratio["high"] - ratio["low"]) / 2
            rows.append({"target": pair.target, "file": file.name, "verdict": "ok", "aa_ratio": ratio})
        else:
            noise = {"baseline_rel": widths[pair.baseline.stem], "optimized_rel": widths[pair.optimized[0].stem],
                     "speedup_rel": math.hypot(*widths.values()), "iterations": options.iterations,
                     "date": time.strftime("%Y-%m-%dT%H:%M:%S")}
            expectations.store_noise(pair.folder / f"expectations_{key}.json", pair.name, noise, key)
    return rows
