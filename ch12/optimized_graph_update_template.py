"""Optimized graph update, template form into one exec (CUDA C++): edit the kept graph, update the exec.

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized (optimized_graph_update_ring.py, measured): per step, c_t into the 16 kernel nodes of the
graph kept from setup (cudaGraphKernelNodeSetParams, host-side, no capture), one cudaGraphExecUpdate
into the next of 4 execs taken in turn, its launch: 0.206-0.212 ms, 56-62% of the 128 us ceiling, its
128 kernels 1.37 us each in the torch profiler, where optimized_graph_update_exec_update's (the same
whole-graph update, into its one exec, after a capture per step) ran 1.02 us.
Optimized (this file): update_template with a ring of one: every step updates and launches the same
exec, as exec_update does, without its capture. CUDA applies an exec update to later launches only;
launches already queued keep the values they were launched with (the exec_update variant relies on
the same rule and matches the baseline's bits), so the ring's spare execs are not needed for a
correct answer; what they may cost is the question this variant asks of the GPU.
Expect: not yet measured. Estimate (arithmetic, not a measurement): if its kernels run as
exec_update's (1.02 us, 131 us for 128) with the ring's ~30-37 us of other time a call, 0.161-0.168
ms, 76-80% of the ceiling; if they run as the ring's (1.37 us), a tie with the ring (0.206-0.212 ms).
Run: python ch12/optimized_graph_update_template.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from optimized_graph_update_ring import RingUpdatedGraph

import aisp


class OneExecTemplate(RingUpdatedGraph):
    ring = 1
    """One exec, updated and launched at every step."""


def get_benchmark() -> aisp.Benchmark:
    return OneExecTemplate()


if __name__ == "__main__":
    aisp.main(get_benchmark)
