"""Optimized fp8 weight decode, GEMV kernel: the same e4m3 weights read by a kernel shaped for 8 rows.

Baseline (baseline_fp8_weight_decode.py): a graphed bf16 decode step of 8 tokens, bound by reading
1.13 GB of bf16 weights.
Optimized: as optimized_fp8_weight_decode.py (every linear layer's weights in e4m3 with a scale per
output channel, 0.57 GB; the step in a CUDA graph), but each linear runs ``ch16_fp8_gemv.fp8_gemv``
instead of the kit's kernel: the weights are the MMA's 128-row side and the 8 tokens its 8-wide
side (half the kit's padded products), x is cast to fp16 in registers (no cast kernel), and the
layers with few output blocks (QKV, attention output, SwiGLU down) split K into fp32 partials that
one small kernel sums and scales (no zeroing, no atomics, no conversion pass): 15 kernels fewer per
step, and 4 loop buffers of 18 KB per program so ~200 KB of weights can be in flight per SM.
Expect (measured, H200, 2026-11-29): 6.496 ms vs 8.558 ms bf16, 1.32x [1.32, 1.32], 35.1% of HBM (the kit's
kernel 6.932 ms, 1.23x; 2026-11-28: 6.491 ms, 1.31x): ~0.41 ms a step. The estimate was ~0.27-0.30 ms
per step (1.8-2.0x) if the linears streamed their 0.57 GB at 3.0-3.4 TB/s and the step's other kernels
took ~0.1 ms; they take ~0.21 ms (attention, norms, RoPE, top-k; the README has the 2026-11-28 profile:
the fp8 GEMVs 45% of the kernel time at 69-77% of DRAM).
Run: python ch16/optimized_fp8_weight_decode_gemv.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

from baseline_fp8_weight_decode import BF16Decode

import aisp
from aisp.kits.fp8_layers import to_fp8


class FP8GemvDecode(BF16Decode):
    def prepare(self) -> None:
        from ch16_fp8_gemv import GemvFP8Linear

        to_fp8(self.model, layer=GemvFP8Linear)


def get_benchmark() -> aisp.Benchmark:
    return FP8GemvDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
