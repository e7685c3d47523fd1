"""Optimized LLM inference, stage 3 of 4: e4m3 weights for decode (ch16: fp8_weight_decode; the
kernel is ch13:quantization's, in ``aisp.kits.fp8``), on the graphed static batches of stage 2.

Baseline (baseline_llm_inference_e2e.py): recompute decode. Stages 1-2 added a KV cache and a
CUDA-graphed decode step over static batches; a graphed step of 8 rows is bound by reading
1.68 GB of bf16 weights (each weight byte feeds 8 FLOPs, far below the bf16 ridge).
Optimized: stage 2 with every linear layer (QKV, attention output, SwiGLU, LM head) stored at
model load as e4m3 with one fp32 scale per output channel (0.84 GB; ``aisp.kits.fp8_layers``). A decode step (at most 16
rows) runs the kit's weight-only fp8 Triton kernel: it streams the fp8 weights, widens them to fp16
in registers and multiplies on the tensor cores, scale in the epilogue; half the bytes per step.
A prefill (hundreds of rows, compute-bound; 3 per call) widens each weight to bf16 in one pass
and applies the channel scale to the GEMM's output. The step is captured as in stage 2.
Expect (measured, H200, 2026-11-27): 106.6 ms, 4.51x [4.42, 4.60] over the baseline, 1.06x over
stage 2 (113.2 ms in that run), cv 0.004; 13.1% of HBM (estimated ~1.2x, ~92 ms, from ch16's 1.23x
for this kernel on a graphed 8-row step: here the step gained ~8%). Redesigned after the
2026-11-26 run, where fp8 came last, on continuous batching, and lost 1.33x to it (see the README).
Run: python ch20/optimized_llm_inference_e2e_s3_fp8_weights.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

from optimized_llm_inference_e2e_s2_cuda_graph import GraphedStaticDecode

import aisp
from aisp.kits.fp8_layers import to_fp8


class FP8StaticDecode(GraphedStaticDecode):
    def convert(self) -> None:
        to_fp8(self.model, widen_prefill=True)


def get_benchmark() -> aisp.Benchmark:
    return FP8StaticDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
