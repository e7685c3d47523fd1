"""Optimized GPT training, stage 2 of 3: flash attention (SDPA) and fused AdamW (ch13:
attention_standard; fused optimizer as in ch19: low_precision_optimizer).

Baseline (baseline_gpt_training_e2e.py): fp32 eager GPT step. Stage 1 moved the matmuls to bf16
tensor cores; each block's attention still writes and re-reads its (seq, seq) scores and
probabilities (~0.5 GB in bf16 per block, kept for backward) and AdamW runs as a chain of foreach
kernels (several passes over 169M fp32 parameters and moments).
Optimized: stage 1 with ``F.scaled_dot_product_attention(is_causal=True)`` (the kit's attention:
the flash kernel keeps scores in on-chip memory, skips the masked half and recomputes them in
backward) and ``AdamW(fused=True)`` (one multi-tensor kernel reads each parameter, gradient and
moment once per step).
Expect (measured, H200, 2026-11-26): 47.3 ms, 7.93x [7.75, 8.11] over the baseline, 2.37x over
stage 1, 296 TFLOP/s, MFU 30.0% (estimated ~1.5x over stage 1, MFU ~35%).
Run: python ch20/optimized_gpt_training_e2e_s2_fused_adamw_sdpa.py  |  aisp bench run -t ch20:gpt_training_e2e
"""

from __future__ import annotations

from optimized_gpt_training_e2e_s1_bf16_autocast import BF16Training

import aisp


class FlashFusedTraining(BF16Training):
    sdpa = True
    fused_adamw = True


def get_benchmark() -> aisp.Benchmark:
    return FlashFusedTraining()


if __name__ == "__main__":
    aisp.main(get_benchmark)
