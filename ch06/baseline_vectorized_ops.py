"""Baseline vectorized ops: out = x * scale + bias, one PyTorch call per row in a Python loop.

Baseline: a 2,048 x 32,768 fp32 matrix scaled and shifted per column (``scale``, ``bias``: 32,768
each) row by row: ``torch.addcmul(bias, x[r], scale, out=out[r])`` 2,048 times. Each call is a
real vector operation over 32,768 elements (the loop a competent engineer writes when the data
arrives as rows), but each pays the Python, dispatcher and launch cost (~6 us per op on a GPU),
and 128 KiB of work per launch leaves the GPU idle between them.
Optimized (optimized_vectorized_ops.py): one ``torch.addcmul`` over the whole matrix, broadcasting
``scale`` and ``bias`` over rows: one launch that streams 256 MiB in and 256 MiB out.
Same op, same answer (bitwise). The baseline is launch-bound by design: the headline is the
optimized op's share of the HBM copy ceiling, not the ratio.
Expect: measured on an H200 at 2,048 x 8,192 (a quarter of these columns): 18.6 ms -> 0.066 ms,
288x, the optimized call at 2,036 GB/s, 48% of HBM copy: 128 MiB in 66 us left ~34 us of the call to
the fixed costs of one eager op (dispatch, launch, ramp-up; 32 us is the HBM time). 512 MiB
amortizes them 4x. Changed after the H200 measurement, not yet re-measured.
Now (estimate, not yet measured): baseline ~19-25 ms (2,048 calls, still launch-bound),
optimized ~0.15-0.17 ms, ~3.2-3.6 TB/s (75-85% of HBM copy); on a CPU 1.1-2x (the rows are
large enough that the per-call overhead is a small part of the work).
Run: python ch06/baseline_vectorized_ops.py  |  aisp bench run -t ch06:vectorized_ops
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class RowsWorkload(aisp.Workload):
    rows: int = 2048
    cols: int = 32768


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
