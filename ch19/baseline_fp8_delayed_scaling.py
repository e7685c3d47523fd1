"""Baseline delayed scaling: dynamic per-tensor fp8 scaling of one large activation (16384 x 8192
bf16, 268 MB): an amax pass, then the fused cast-transpose.

Every fp8 Linear step casts its activation, weight and gradient (fp8_linear_training). Dynamic
scaling scales a tensor by its own amax, so the amax must be known before the cast reads the tensor.
Baseline: one reduction pass (``torch.linalg.vector_norm(inf)``: reads 2 B/element), then the fused
Triton cast-transpose of ch19_cast (reads 2, writes 1 + 1): 6 bytes per element, 805 MB per call.
Optimized (optimized_fp8_delayed_scaling.py): delayed scaling. The scale comes from the largest
amax of the tensor's last 16 casts, known before the tensor is read; the same cast-transpose kernel
records this tensor's amax with an atomic max in its one pass: 4 bytes per element, 537 MB.
The first H200 run measured this pair inside a whole fp8 Linear step (16384 tokens, 2048 x 2048):
1.01x [0.95, 1.09], the saved reads (~40 us) lost in the GEMMs and run-to-run noise; here the saved
read is the whole difference, on the memory-bound cast where it matters.
Expect (measured, H200, 2026-11-27): baseline 0.2564 ms (the same fused kernel plus a 268 MB read);
optimized 0.2085 ms, 1.23x [1.22, 1.24] (estimated 1.3-1.5x), 2.57 TB/s, 61.3% of HBM copy (target
80%); the persistent variant slower, 0.2315 ms, 1.11x, 55.2%. Earlier: 0.2631 -> 0.2304 ms, 1.17x
(2026-11-26); 0.258 -> 0.208 ms, 1.23x (first measurement of this design).
Tolerance: rtol 0.4, rel L2 0.25 (fp8 defaults: 0.15, 0.1), atol the fp8 default. With x fixed the
history holds amax(x) after the first call, so both sides use the same scale and write the same
bytes. On refilled inputs (the harness's checked call) the delayed scale lags by design: the history
holds the previous tensor's amax, and the ratio of two maxima of 134M normals has a std of ~5%, so
every e4m3 code moves by that ratio plus up to a rounding step. Simulated (8M normals, e4m3): a
ratio off by 10% fails the defaults (425 elements two steps apart, rel L2 0.095); the declared
tolerance passes ratios from -15% to +30% (rel L2 0.18 and 0.23). Another seed's tensor: rel L2 ~1.4.
Run: python ch19/baseline_fp8_delayed_scaling.py  |  aisp bench run -t ch19:fp8_delayed_scaling
"""

from __future__ import annotations

import torch
from baseline_fp8_cast_transpose import cast_workload
from ch19_fp8 import E4M3, DelayedScaling, DynamicScaling

import aisp

WORKLOAD = cast_workload(precision="fp8", rtol=0.4, max_rel_l2=0.25, requires=aisp.Requirements(cuda=True, min_compute_capability=(8, 9),
                                                                      packages=("triton",)))


class DynamicScalingCast(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w = self.workload
        self.x = torch.randn(w.rows, w.cols, generator=self.generator(), device=self.device).bfloat16()
        self.prepare()

    def prepare(self) -> None:
        """Untimed: build the scaler, warm the kernels."""
        self.quant: DynamicScaling | DelayedScaling = DynamicScaling()
        self.run()

    def run(self) -> tuple[torch.Tensor, ...]:
        out = self.quant("x", self.x, E4M3)
        return out.q, out.qt, out.scale


def get_benchmark() -> aisp.Benchmark:
    return DynamicScalingCast()


if __name__ == "__main__":
    aisp.main(get_benchmark)
