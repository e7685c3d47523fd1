"""Optimized two-GPU GPT training, stage 4 of 4: fused AdamW (ch19: low_precision_optimizer;
ch13).

Baseline (baseline_ddp_training_e2e_multigpu.py): DataParallel, fp32. Stage 3 runs DDP in bf16
autocast, gradients in the buckets; every rank then runs ``torch.optim.AdamW``'s default foreach
update over 169M fp32 parameters: a chain of multi-tensor kernels, each a pass over parameters,
gradients or moments (~10 passes of 676 MB, ~2.5 ms a step).
Optimized: stage 3 with ``AdamW(fused=True)``: one multi-tensor kernel reads each parameter,
gradient and both moments once and writes parameter and moments once (~4.7 GB, ~1.4 ms a step).
Why faster: ~1.1 ms a step of HBM traffic fewer, on both ranks at once.
Expect (measured, 2 x H200, 2026-11-27, run 040354): 46.01 ms (p10 39.5, p90 48.6), 2.36x [2.09,
2.66] over the baseline, 1.12x over stage 3's median, MFU 7.8% (estimated ~1.1x over stage 3). The
torch profiler (2 x H200, 2026-11-29): rank 0 runs 23.6 ms of kernels a call (the step timed 23.0
that day): the fp32 gradient all-reduce 5.6 ms, AdamW 3.7, copies and casts 2.4, the top two GEMMs
2.1: the rest of the distance to the ceiling is communication and elementwise work, not GEMMs.
Run: aisp bench run -t ch20:ddp_training_e2e_multigpu
"""

from __future__ import annotations

from optimized_ddp_training_e2e_multigpu_s3_bucket_view import BucketView

import aisp


class FusedAdamW(BucketView):
    fused_adamw = True


def get_benchmark() -> aisp.Benchmark:
    return FusedAdamW()


if __name__ == "__main__":
    aisp.main(get_benchmark)
