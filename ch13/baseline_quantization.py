"""Baseline quantization: a bf16 MLP in the decode regime (16 tokens, 8192 -> 32768 -> 8192).

Baseline: one decode step of 16 sequences through a transformer MLP the size of a 70B-class
model's (d 8192, 4x expansion, GELU): ``F.linear`` (cuBLAS), ``F.gelu``, ``F.linear``, all bf16,
as one would serve it. At 16 tokens each weight byte feeds 16 FLOPs, far left of the H200's bf16
ridge (~190 FLOP/byte): the step's time is reading 1.07 GB of bf16 weights (~0.27 ms at 4 TB/s).
Optimized (optimized_quantization.py): weight-only fp8. Weights are stored as e4m3 with one
scale per output channel (set at model load); a Triton kernel streams the 0.54 GB of fp8
weights, widens them to fp16 in registers (Hopper converts two e4m3 per instruction) and
multiplies on the tensor cores: half the bytes of the step, so up to 2x.
The workload's bytes are the fewest a step must read: the fp8 weights plus activations, so the
optimized variant's GB/s is its share of HBM; the baseline reads twice that (its true rate is 2x
its reported GB/s).
Expect: 1.41x [1.41, 1.42] measured on an H200 (0.298 -> 0.216 ms; 1.30x, 0.312 -> 0.245 ms, in
a later full-chapter run); the baseline reads its bf16 weights at 3.60 TB/s, the optimized its fp8
weights at 2.50 TB/s (59% of HBM copy bandwidth; 52% in the full run).
Tolerance: e4m3 keeps 3 mantissa bits, so each weight is rounded by up to 1/16 of its binade
(per-channel scale: the row's largest weight maps to 448). Emulated on a CPU in fp32 at
d 2048 / hidden 8192 (the relative error does not depend on the width), the fp8 MLP's output
differs from bf16's by 0.038 relative L2 (bf16's own error vs fp32: 0.003), at worst 0.11
absolute where outputs have rms 0.66 (x ~ N(0, 1), W ~ N(0, 1/fan_in)), the same over seeds and
at d 1024: element_tol 0.1 (0.3 absolute at max |out| ~3), rtol 0, max rel. L2 0.08 (about 2x margin); a wrong scale,
a transposed weight or a missing GELU errs by O(1). metrics() reports both variants' errors
against the fp32 MLP.
Run: python ch13/baseline_quantization.py  |  aisp bench run -t ch13:quantization
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class DecodeMLPWorkload(aisp.Workload):
    tokens: int = 16
    """Sequences decoded together (one token each)."""
    dim: int = 8192
    hidden: int = 32768


def _workload() -> DecodeMLPWorkload:
    w = DecodeMLPWorkload()
    weights = 2 * w.dim * w.hidden
    activations = 2 * w.tokens * (2 * w.dim + 2 * w.hidden)
    return DecodeMLPWorkload(flops=2.0 * w.tokens * weights, bytes=float(weights + activations),
                             items=w.tokens, item_unit="tokens", precision="fp8", element_tol=0.1, rtol=0.0,
                             max_rel_l2=0.08, requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


def mlp_weights(bench: aisp.Benchmark) -> tuple[torch.Tensor, torch.Tensor]:
    """(w1 (hidden, dim), w2 (dim, hidden)) in bf16, N(0, 1/fan_in), drawn first from the seed."""
    w, gen = bench.workload, bench.generator()
    w1 = torch.randn(w.hidden, w.dim, generator=gen, device=bench.device) / w.dim**0.5
    w2 = torch.randn(w.dim, w.hidden, generator=gen, device=bench.device) / w.hidden**0.5
    return w1.bfloat16(), w2.bfloat16()


def error_metrics(bench: aisp.Benchmark, out: torch.Tensor) -> dict[str, float]:
    """Max abs and relative L2 error of ``out`` against the fp32 MLP of the same bf16 weights."""
    w1, w2 = (t.float() for t in mlp_weights(bench))
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = F.linear(F.gelu(F.linear(bench.x.float(), w1), approximate="tanh"), w2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    diff = out.float() - ref
    return {"max_abs_err_vs_fp32": float(diff.abs().max()), "rel_l2_err_vs_fp32": float(diff.norm() / ref.norm())}


class BF16DecodeMLP(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        self.w1, self.w2 = mlp_weights(self)
        gen = self.generator()
        gen.manual_seed(self.seed + 1_000_003)
        self.x = torch.randn(self.workload.tokens, self.workload.dim, generator=gen, device=self.device).bfloat16()

    def run(self) -> torch.Tensor:
        return F.linear(F.gelu(F.linear(self.x, self.w1), approximate="tanh"), self.w2)

    def metrics(self) -> dict[str, float]:
        return error_metrics(self, self.run())


def get_benchmark() -> aisp.Benchmark:
    return BF16DecodeMLP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
