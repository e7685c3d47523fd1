"""Baseline vectorized ops: out = x * scale + bias, one PyTorch call per row in a Python loop.

Baseline: a 2,048 x 131,072 fp32 matrix scaled and shifted per column (``scale``, ``bias``:
131,072 each) row by row: ``torch.addcmul(bias, x[r], scale, out=out[r])`` 2,048 times. Each call
is a real vector operation over 131,072 elements (the loop a competent engineer writes when the
data arrives as rows), but each pays the Python, dispatcher and launch cost (~6 us per op on a
GPU), and 512 KiB of work per launch leaves the GPU idle between them.
Optimized (optimized_vectorized_ops.py): one ``torch.addcmul`` over the whole matrix, broadcasting
``scale`` and ``bias`` over rows: one launch that streams 1 GiB in and 1 GiB out.
optimized_vectorized_ops_native.py (GPU): one kernel of ours, float4 rows with scale and bias in
registers. Same op, same answer (bitwise). The baseline is launch-bound by design: the headline is the
optimized op's share of the HBM copy ceiling, not the ratio.
Expect (measured, H200, 2026-11-27): 19.63 ms -> native 0.6203 ms, 32.33x [30.39, 34.39], 3.46 TB/s,
82.5% of HBM copy (the pair's best); PyTorch's broadcast addcmul 0.8036 ms, 24.4x, 2.67 TB/s, 63.7%.
The same run at the old 2,048 x 32,768 (512 MiB a call) gave 0.2353 ms (54.3%) and native 0.1783 ms
(71.7%): launch, ramp-up and tail weighed more in a short call, hence the 4x width. Earlier (H200,
2026-11-26, 2,048 x 32,768): 21.63 -> 0.2241 ms, 98.59x, 57%; at 2,048 x 8,192: 0.066 ms, 288x, 48%.
The ratio only counts 2,048 launches; the share of HBM copy is the headline. CPU (estimate): 1.1-2x.
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
                        items=s.rows, item_unit="rows", precision="fp32",
                        ceiling_note="profiled (ncu, H200): affine_rows 596 us at DRAM 74% (3.58 TB/s, 85% of HBM copy), occupancy 94%, long_scoreboard 169; timed from idle: +70 us issue",
                        window="idle")


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
