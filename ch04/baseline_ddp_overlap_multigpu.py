"""Baseline gradient sync (2 GPUs): backward first, then one all-reduce of all the gradients.

Baseline: each rank runs forward and backward of an 8 x Linear(4096) MLP (bf16 autocast, fp32
weights and gradients, 134 M parameters) on its 4,096 of a global batch of 8,192 samples, then
flattens the gradients and all-reduces them (537 MB) in one NCCL call. One call is the competent
way to sync after backward (see gradient_bucketing_multigpu for one call per parameter); but NVLink
idles during backward (~6 ms) and the tensor cores idle during the all-reduce (~1.7 ms at the
measured ~320 GB/s bus bandwidth).
Optimized (optimized_ddp_overlap_multigpu.py): DDP's ~25 MB buckets (here a 67 MB weight each),
all-reduced as backward produces them, gradients living in the buckets and averaged inside NCCL.
Expect (measured, 2 x H200, 2026-11-27): 8.071 -> 7.773 ms, 1.04x [1.01, 1.07] in the whole-chapter
run (8.067 -> 7.866 ms, 1.03x [1.00, 1.06] in another); stock DDP 7.886 ms, 1.02x. Far from the ~1.2x
a free overlap would give, and a torch.profiler trace says why: overlapped, each 67 MB all-reduce
takes ~0.4 ms instead of ~0.21 (its 24 NCCL blocks share HBM with backward), and every backward
GEMM that starts while NCCL holds 24 SMs runs its persistent 128-132-block grid in two waves
(~0.08 ms instead of ~0.045). A 16-SM GEMM carveout (kits.multirank.gemm_carveout, cuBLASLt)
removes the second wave but costs more: 8.43 ms against 7.67. At 1,024 samples per rank backward
is too short to hide the all-reduces under (1.00x stock, 0.89x configured); at 33.6M parameters
(2026-11-26) 0.84-0.86x.
Run: aisp bench run -t ch04:ddp_overlap_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from ch04_common import step_workload
from ch04_dataparallel import AllReduceAfterBackward

import aisp

WORKLOAD = step_workload(batch=8192, width=4096, ceiling_note="profiled (torch profiler, 2xH200): _pulled's "
                         "kernels 5.73 ms a call: GEMMs 3.98, means 0.56, other kernels ~1.2 in series; host gaps only under the profiler")


class Baseline(AllReduceAfterBackward):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
