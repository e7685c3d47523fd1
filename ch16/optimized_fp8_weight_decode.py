"""Optimized fp8 weight decode: the decode step's linear layers read e4m3 weights (half the bytes).

Baseline (baseline_fp8_weight_decode.py): a graphed bf16 decode step of 8 tokens, bound by reading
1.13 GB of bf16 weights.
Optimized: at model load (setup) every linear layer (QKV, attention output, SwiGLU up/gate and
down, LM head) is replaced by ``FP8Linear`` (``aisp.kits.fp8_layers``): e4m3 weights with one
fp32 scale per output channel (row amax -> 448), 0.57 GB in all. Its forward casts the 8 activation
rows to fp16 and calls the kit's weight-only fp8 Triton kernel (``aisp.kits.fp8.fp8_linear``, from
ch13:quantization): it streams the fp8 weights, widens two per instruction to fp16 in registers and multiplies on the
tensor cores, applying the channel scale in the epilogue; wide-K layers split K over ~256 CTAs
(fp32 atomics). Norms, RoPE, attention and the cache stay bf16; the step is captured in a CUDA
graph as in the baseline.
Expect (measured, H200, 2026-11-26): 6.964 ms vs 8.541 ms bf16, 1.23x [1.23, 1.23] (estimated
1.4-1.7x; 1.21x on 2026-11-23): 1.38 TB/s on the fp8 bytes, 33% of HBM, against ~2.2 TB/s for the
bf16 step. Measured again (H200, 2026-11-29): 6.932 ms vs 8.558 ms, 1.23x [1.23, 1.23], 32.9% of HBM;
the ``_gemv`` variant 6.496 ms (see its header; the README has the 2026-11-28 profile).
Run: python ch16/optimized_fp8_weight_decode.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

from baseline_fp8_weight_decode import BF16Decode

import aisp
from aisp.kits.fp8_layers import to_fp8


class FP8WeightDecode(BF16Decode):
    def prepare(self) -> None:
        to_fp8(self.model)


def get_benchmark() -> aisp.Benchmark:
    return FP8WeightDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
