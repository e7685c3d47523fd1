"""Baseline runtime-compiled kernel: a bias + SwiGLU gate as four eager PyTorch kernels.

Baseline: ``silu(gate + bias_g) * (up + bias_u)`` on two 16,384 x 8,192 bf16 projections
(256 MiB each), the gated MLP's activation when the projections keep their biases apart. Eager
PyTorch launches four elementwise kernels and writes three bf16 intermediates that the next one
reads back: 2.25 GiB of HBM traffic for 0.75 GiB of needed bytes (read gate and up, write out).
Optimized (optimized_runtime_compiled_kernel.py): the same chain as one CUDA C++ kernel whose
source is a Python string, compiled at run time by NVRTC through ``cupy.RawKernel`` (cached by
CuPy on disk) and launched on PyTorch's current stream: 3 passes over HBM.
Expect: H200, the first kernel: 3.43x [3.42, 3.44], 0.9594 -> 0.2799 ms, 2.88 TB/s (68% of the
~4.2 TB/s copy ceiling, 2026-11-28), issue-bound by its SASS count; the rewritten kernel (H200, 2026-11-28): 0.9573 -> 0.1979 ms,
4.82x [4.78, 4.86], 4.07 TB/s (96% of the copy ceiling). CPU: not run (CUDA kernel).
Tolerance: bf16 default. The kernel rounds each intermediate to bf16 where eager PyTorch stores
it (round to nearest even); only the SiLU's division (the hardware reciprocal, within 2 fp32 ulps)
differs, so an output moves by an ulp now and then (tests/test_ch14_gpu.py counts them).
Run: python ch14/baseline_runtime_compiled_kernel.py  |  aisp bench run -t ch14:runtime_compiled_kernel
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class GateWorkload(aisp.Workload):
    rows: int = 16384
    dim: int = 8192


def gate_workload(**kw: object) -> GateWorkload:
    w = GateWorkload(**kw)
    needs = aisp.Requirements(cuda=True, min_compute_capability=(8, 0), packages=("cupy",))  # bf16x2 PTX
    return GateWorkload(**kw, bytes=3.0 * 2 * w.rows * w.dim, items=w.rows, item_unit="rows",
                        precision="bf16", requires=needs)


WORKLOAD = gate_workload(ceiling_note="rewrite timed 0.198 ms, 96% of HBM copy (H200, 2026-11-28); ncu: 191.6 us at DRAM 86% (4.12 TB/s); the first kernel was 68% (issue-bound)")


class EagerBiasSwiGLU(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("gate", "up")

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.gate = torch.randn(w.rows, w.dim, generator=gen, device=dev).to(torch.bfloat16)
        self.up = torch.randn(w.rows, w.dim, generator=gen, device=dev).to(torch.bfloat16)
        self.bias_g = (0.1 * torch.randn(w.dim, generator=gen, device=dev)).to(torch.bfloat16)
        self.bias_u = (0.1 * torch.randn(w.dim, generator=gen, device=dev)).to(torch.bfloat16)

    def run(self) -> torch.Tensor:
        return F.silu(self.gate + self.bias_g) * (self.up + self.bias_u)


def get_benchmark() -> aisp.Benchmark:
    return EagerBiasSwiGLU()


if __name__ == "__main__":
    aisp.main(get_benchmark)
