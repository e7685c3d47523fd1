"""Optimized stream priority, PDL variant: the chain on a high-priority stream, each of its kernels
resident on the GPU before the one it follows ends (programmatic dependent launch).

Baseline (baseline_stream_priority.py): the chain of 64 small dependent kernels on a stream of the
bulk's priority waits behind each bulk pass: its latency ~ bulk + chain.
Optimized: optimized_stream_priority.py's ``torch.cuda.Stream(priority=-1)``, and each chain kernel
launched with ``cudaLaunchAttributeProgrammaticStreamSerialization`` (ch11_kernels.cu
``small_kernel_pdl``). Priority issues a chain kernel's blocks first once SM slots free up, but
cannot preempt the bulk blocks holding them: each step still waits for its launch and for 8 slots.
With PDL, kernel i + 1 launches as soon as kernel i starts its FMAs: its blocks take their slots
during kernel i's ~30 us and wait in ``griddepcontrol.wait`` until kernel i has completed and its
output is visible, then read it and run. The chain stays one dependent chain (each kernel reads
the one before's output after that wait); only the launch and the slot hunt leave it.
Expect: measured, H200, 2026-11-29 (two runs): 2.6138 and 2.6151 ms, 75.2% and 75.1% of the
ceiling (the chain's 64 x 15,000 dependent FMAs at fma_dependent's 2.05 ns = 1.965 ms), 1.33x
[1.32, 1.33] and 1.32x [1.31, 1.33] over the baseline (3.465 / 3.457 ms); priority alone read
2.7934 / 2.791 ms (70.3 / 70.4%) in the same runs: 40.8 us a step against 43.6, so PDL hides ~2.8 us
a step. Still below 80% (2.456 ms); not profiled yet (the estimate put the rest on the bulk's
share of the SMs and HBM during its first ~1.5 ms).
Estimated before (arithmetic): 2.45-2.58 ms, 76-80%, counting ~1.3 us a kernel from a 64-a-trip FMA
loop since reverted (it made every ch11 kernel ~10% slower) and 2-4 us a step hidden by PDL.
Run: python ch11/optimized_stream_priority_pdl.py  |  aisp bench run -t ch11:stream_priority
"""

from __future__ import annotations

from optimized_stream_priority import HighPriority

import aisp


class HighPriorityDependentLaunch(HighPriority):
    pdl = True


def get_benchmark() -> aisp.Benchmark:
    return HighPriorityDependentLaunch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
