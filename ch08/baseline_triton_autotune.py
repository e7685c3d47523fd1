"""Baseline Triton autotune: an fp16 Triton matmul with one hand-picked tile configuration.

Baseline: C = A @ B, 8,192 x 8,192 x 8,192 in fp16 with fp32 accumulation (1.1 TFLOP per call),
the matmul of ch08_triton.py launched with a first guess: 64 x 64 x 32 tiles and Triton's default
num_warps=4, num_stages=3. Small tiles re-read A and B from L2 many times and give each
tensor-core instruction little work per load: the configuration, not the kernel, limits it.
Optimized (optimized_triton_autotune.py): the same kernel under ``@triton.autotune`` over 8 configs
(the fixed one included), keyed on (M, N, K). Tuning times every config on the first call; setup()
makes that call, so timed calls run the chosen config. Tuning is a one-time cost per shape and
process (seconds), like compilation, and is not part of a call.
Fp32 accumulation in tiles of different K depth: results differ by fp16 rounding (fp16 tolerance).
Expect: 2.27x [2.25, 2.30] measured on an H200 (3.625 -> 1.589 ms); the tuned kernel at 692 TFLOP/s, 88%
of the fp16 tensor-core rate (~783 TFLOP/s dense; 92% of the 749 in peaks/peak_h200.json).
Run: python ch08/baseline_triton_autotune.py  |  aisp bench run -t ch08:triton_autotune
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class MatmulWorkload(aisp.Workload):
    m: int = 8192
    n: int = 8192
    k: int = 8192


def _workload() -> MatmulWorkload:
    s = MatmulWorkload()
    return MatmulWorkload(flops=2.0 * s.m * s.n * s.k, bytes=2.0 * (s.m * s.k + s.k * s.n + s.m * s.n),
                          items=1, item_unit="GEMMs", precision="fp16",
                          requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class FixedConfigMatmul(aisp.Benchmark):
    """C = A @ B with the fixed tile configuration."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c",)

    def setup(self) -> None:
        import ch08_triton

        w, gen = self.workload, self.generator()
        self.triton = ch08_triton
        self.a = torch.randn(w.m, w.k, generator=gen, device=self.device).half()
        self.b = torch.randn(w.k, w.n, generator=gen, device=self.device).half()
        self.c = torch.empty(w.m, w.n, device=self.device, dtype=torch.float16)
        got, want = self.run().float(), (self.a @ self.b).float()
        error = float((got - want).norm() / want.norm())
        assert error < 1e-2, f"{type(self).__name__}: relative L2 error {error:.2e} against torch.matmul"

    def run(self) -> torch.Tensor:
        return self.triton.launch(self.triton.matmul_kernel, self.a, self.b, self.c, **self.triton.FIXED)


def get_benchmark() -> aisp.Benchmark:
    return FixedConfigMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
