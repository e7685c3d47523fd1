"""Optimized fp8 with Transformer Engine: ``te.Linear`` under ``fp8_autocast`` (delayed scaling).

Baseline (baseline_precisionfp8_te.py): bf16 ``F.linear``.
Optimized: a ``te.Linear`` holding the same bf16 weight runs inside
``te.fp8_autocast(fp8_recipe=DelayedScaling(HYBRID, amax_history_len=16))``: TE casts input and
weight to e4m3 with scales derived from the amax history of earlier calls (no amax reduction
on the critical path) and runs its fp8 GEMM. setup() runs calibration passes so the history
holds real amaxes before anything is compared or timed.
``--validate`` runs the layer once and checks its error against an fp32 reference:
relative L2 error at most 8% and max abs error within the pair's atol, printing both; it
prints SKIPPED with the reason, and exits 0, where Transformer Engine or a fp8 GPU is missing.
Expect: 1.5-1.8x on an H100/H200.
Run: python ch13/optimized_precisionfp8_te.py --validate  |  aisp bench run -t ch13:precisionfp8_te
"""

from __future__ import annotations

import importlib
import sys

import torch
from baseline_precisionfp8 import error_metrics
from baseline_precisionfp8_te import WORKLOAD, BF16LinearReference

import aisp
from aisp.harness.benchmark import unmet_requirements

CALIBRATION_PASSES = 4
MAX_REL_L2 = 0.08


class TransformerEngineFP8(BF16LinearReference):
    def setup(self) -> None:
        super().setup()
        te = importlib.import_module("transformer_engine.pytorch")
        recipe = importlib.import_module("transformer_engine.common.recipe")
        w = self.workload
        self.layer = te.Linear(w.d_in, w.d_out, bias=False, params_dtype=torch.bfloat16, device=self.device)
        with torch.no_grad():
            self.layer.weight.copy_(self.w)
        self.autocast = lambda: te.fp8_autocast(enabled=True, fp8_recipe=recipe.DelayedScaling(
            fp8_format=recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max"))
        for _ in range(CALIBRATION_PASSES):
            self.run()

    @torch.no_grad()
    def run(self) -> torch.Tensor:
        with self.autocast():
            return self.layer(self.x)


def get_benchmark() -> aisp.Benchmark:
    return TransformerEngineFP8()


def validate() -> int:
    """Check TE's fp8 output against fp32; 0 when within bounds or skipped, 1 when not."""
    bench = get_benchmark()
    reason = unmet_requirements(WORKLOAD.requires, bench.device)
    if reason:
        print(f"SKIPPED: {reason}")
        return 0
    bench.setup()
    out = bench.run()
    errors = error_metrics(out, bench.x, bench.w)
    limit = WORKLOAD.element_tol * float(out.float().abs().max())  # the element bound, absolute
    ok = errors["rel_l2_err_vs_fp32"] <= MAX_REL_L2 and errors["max_abs_err_vs_fp32"] <= limit
    print(f"TE fp8 vs fp32: rel L2 error {errors['rel_l2_err_vs_fp32']:.4f} (limit {MAX_REL_L2}), "
          f"max abs error {errors['max_abs_err_vs_fp32']:.4f} (limit {limit:.3f}): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if "--validate" in sys.argv:
        sys.exit(validate())
    aisp.main(get_benchmark)
