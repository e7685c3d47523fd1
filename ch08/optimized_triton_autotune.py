"""Optimized Triton autotune: the same matmul kernel, its configuration chosen by @triton.autotune.

Baseline (baseline_triton_autotune.py): 64 x 64 x 32 tiles, 4 warps, 3 stages, fixed.
Optimized: ``matmul_tuned`` (ch08_triton.py) times 8 configurations (tiles up to 256 x 128 x 64,
4 or 8 warps, 3 or 4 pipeline stages) on the first call for this (M, N, K) and keeps the fastest.
That first call is in setup() (the baseline's setup makes the same warm-up call to check its
result), so the timed calls run only the chosen configuration; the tuning is a one-time cost per
shape and process, reported here in ``metrics()`` as the chosen config, not hidden work.
Larger tiles load each A and B element fewer times per FLOP and keep the tensor cores fed.
Expect: 2.27x [2.25, 2.30] measured on an H200 (3.625 -> 1.589 ms), 692 TFLOP/s: 88% of fp16 tensor cores.
Run: python ch08/optimized_triton_autotune.py  |  aisp bench run -t ch08:triton_autotune
"""

from __future__ import annotations

import torch
from baseline_triton_autotune import FixedConfigMatmul

import aisp


class AutotunedMatmul(FixedConfigMatmul):
    def run(self) -> torch.Tensor:
        return self.triton.launch(self.triton.matmul_tuned, self.a, self.b, self.c)

    def metrics(self) -> dict[str, float]:
        best = self.triton.matmul_tuned.best_config
        return {"block_m": float(best.kwargs["BLOCK_M"]), "block_n": float(best.kwargs["BLOCK_N"]),
                "block_k": float(best.kwargs["BLOCK_K"]), "num_warps": float(best.num_warps),
                "num_stages": float(best.num_stages)}


def get_benchmark() -> aisp.Benchmark:
    return AutotunedMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
