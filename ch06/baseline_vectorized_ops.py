"""Baseline vectorized ops: out = x * scale + bias, one PyTorch call per row in a Python loop.

Baseline: a 2,048 x 32,768 fp32 matrix scaled and shifted per column (``scale``, ``bias``: 32,768
each) row by row: ``torch.addcmul(bias, x[r], scale, out=out[r])`` 2,048 times. Each call is a
real vector operation over 32,768 elements (the loop a competent engineer writes when the data
arrives as rows), but each pays the Python, dispatcher and launch cost (~6 us per op on a GPU),
and 128 KiB of work per launch leaves the GPU idle between them.
Optimized (optimized_vectorized_ops.py): one ``torch.addcmul`` over the whole matrix, broadcasting
``scale`` and ``bias`` over rows: one launch that streams 256 MiB in and 256 MiB out.
optimized_vectorized_ops_native.py (GPU): one kernel of ours, float4 rows with scale and bias in
registers. Same op, same answer (bitwise). The baseline is launch-bound by design: the headline is the
optimized op's share of the HBM copy ceiling, not the ratio.
Expect (measured, H200, 2026-11-26): 21.63 -> 0.2241 ms, 98.59x [97.17, 100.03]; the optimized call
at 2.40 TB/s, 57% of HBM copy (estimated ~0.15-0.17 ms, 75-85%: 4x the bytes lifted the share
less than expected; not profiled). Earlier, measured on an H200 at 2,048 x 8,192 (a quarter of
these columns): 18.6 -> 0.066 ms, 288x, 2,036 GB/s (48%): 128 MiB in 66 us left ~34 us of the call
to one eager op's fixed costs. On a CPU (estimate) 1.1-2x: the rows are large enough that the
per-call overhead is a small part of the work.
Run: python ch06/baseline_vectorized_ops.py  |  aisp bench run -t ch06:vectorized_ops
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class RowsWorkload(aisp.Workload):
    rows: int = 2048
    cols: int = 131072


def _workload() -> RowsWorkload:
    s = RowsWorkload()
    return RowsWorkload(flops=2.0 * s.rows * s.cols, bytes=4.0 * (2 * s.rows * s.cols + 2 * s.cols),
                        items=s.rows, item_unit="rows", precision="fp32")


WORKLOAD = _workload()


class RowLoop(aisp.Benchmark):
    """out[r] = x[r] * scale + bias, one call per row."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.x = torch.randn(w.rows, w.cols, device=self.device, generator=gen)
        self.scale = torch.rand(w.cols, device=self.device, generator=gen) + 0.5
        self.bias = torch.randn(w.cols, device=self.device, generator=gen)
        self.out = torch.empty_like(self.x)

    def run(self) -> torch.Tensor:
        for r in range(self.workload.rows):
            torch.addcmul(self.bias, self.x[r], self.scale, out=self.out[r])
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return RowLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
