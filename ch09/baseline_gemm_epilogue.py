"""Baseline GEMM epilogue: a Linear layer, then its GELU as a separate kernel.

Baseline: ``gelu(linear(x, w, b), approximate="tanh")``, the up-projection of a transformer MLP
(``nn.Sequential(nn.Linear, nn.GELU("tanh"))``) on 65,536 tokens, 1,024 -> 4,096 features, bf16.
The GEMM (0.55 TFLOP) writes its 512 MiB bf16 output (cuBLASLt adds the bias in its epilogue, or a
separate add kernel does, as PyTorch decides), then the GELU kernel reads it back and writes it
again: 1 GiB of extra HBM traffic, ~0.25 ms at ~4.2 TB/s beside a ~0.7 ms GEMM.
Optimized (optimized_gemm_epilogue.py): ``torch._addmm_activation(b, x, w.t(), use_gelu=True)``:
cuBLASLt's GELU_BIAS epilogue applies bias and GELU to the fp32 accumulators before the one store.
Same tanh GELU; the fused side rounds once instead of after each step (bf16 tolerance).
Expect (measured, H200, 2026-11-23): 1.23x [1.23, 1.24]: GEMM + GELU 1.10 ms (501 TFLOP/s), cuBLASLt
GELU_BIAS epilogue 0.889 ms (619 TFLOP/s, 79% of the 783 TFLOP/s bf16 tensor-core rate). CPU: not
run (cuBLASLt epilogue).
Run: python ch09/baseline_gemm_epilogue.py  |  aisp bench run -t ch09:gemm_epilogue
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class LinearWorkload(aisp.Workload):
    tokens: int = 65536
    d_in: int = 1024
    d_out: int = 4096


def _workload() -> LinearWorkload:
    s = LinearWorkload()
    # the GEMM's FLOPs; bytes: read x, w, b and write y once (bf16)
    return LinearWorkload(flops=2.0 * s.tokens * s.d_in * s.d_out,
                          bytes=2.0 * (s.tokens * s.d_in + s.d_out * s.d_in + s.d_out + s.tokens * s.d_out),
                          items=s.tokens, item_unit="tokens", precision="bf16",
                          ceiling_note="ncu (H200, base clock): cuBLASLt's gelubias GEMM 849 us at tensor pipe 72% "
                                       "against the bias GEMM's 764 us at 83%; timed 76-83% at the power cap",
                          requires=aisp.Requirements(cuda=True))


WORKLOAD = _workload()


class LinearThenGelu(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        s, gen, dev = self.workload, self.generator(), self.device
        self.x = torch.randn(s.tokens, s.d_in, generator=gen, device=dev).to(torch.bfloat16)
        self.w = (torch.randn(s.d_out, s.d_in, generator=gen, device=dev) / s.d_in**0.5).to(torch.bfloat16)
        self.b = (0.1 * torch.randn(s.d_out, generator=gen, device=dev)).to(torch.bfloat16)

    def run(self) -> torch.Tensor:
        return F.gelu(F.linear(self.x, self.w, self.b), approximate="tanh")


def get_benchmark() -> aisp.Benchmark:
    return LinearThenGelu()


if __name__ == "__main__":
    aisp.main(get_benchmark)
