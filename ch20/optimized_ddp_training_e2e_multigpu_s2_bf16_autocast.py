"""Optimized two-GPU GPT training, stage 2 of 4: bf16 autocast (ch13: mixed precision; ch19).

Baseline (baseline_ddp_training_e2e_multigpu.py): DataParallel, fp32. Stage 1 (DDP) runs one
process per GPU, but its GEMMs still run on the fp32 FMA pipes (~50 TFLOP/s on an H200).
Optimized: stage 1 with forward and loss under ``torch.autocast(dtype=torch.bfloat16)``: the
matmuls (and their backward) run on bf16 tensor cores; weights, gradients, the all-reduce and AdamW
stay fp32 (master weights).
Why faster: ~15x the FLOP rate on the GEMMs, half the bytes of activations saved for backward.
The step drops from ~39 ms to ~10 ms, so the rest grows in share: the 676 MB all-reduce (~2.3 ms)
now barely fits under a ~3.5 ms backward, and foreach AdamW (~2.5 ms) is a quarter of the step;
stages 3-4 go after them.
Expect (measured, 2 x H200, 2026-11-27, run 040354): 52.22 ms (p10 45.1, p90 55.5), 2.08x over the
baseline, 1.89x over stage 1's median, MFU 6.9% (estimated ~20 ms, ~3.9x over stage 1; not
profiled).
Run: aisp bench run -t ch20:ddp_training_e2e_multigpu
"""

from __future__ import annotations

from optimized_ddp_training_e2e_multigpu_s1_ddp import DDPFp32

import aisp


class DDPBf16(DDPFp32):
    autocast = True


def get_benchmark() -> aisp.Benchmark:
    return DDPBf16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
