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
Expect: not yet measured. Estimate (arithmetic, not a measurement): the ceiling is the chain's
64 x 15,000 dependent FMAs at 2.05 ns (fma_dependent, H200) = 1.965 ms; 80% is 2.456 ms, 38.4 us
a step. Measured so far (H200): 2.793 ms, 43.6 us a step (39.5 us kernels, whose chain alone is
~30.5 us at fma_chain's ~4.02 cycles an FMA and 1.98 GHz). fma_chain's loop now saves ~1.3 us a
kernel (81 us); if PDL hides 2-4 us of the ~13 us a step spends outside its chain under the bulk:
2.45-2.58 ms, 76-80%. The rest is the bulk's share of the SMs and HBM during the first 1.5 ms.
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
