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
Expect: measured (H200 of a 2 x H200 host, 2026-11-30, one run of 20 samples, --gpus 1): 0.3564 ms
against the ring's 0.3844, the node-update variant's 0.3793, exec_update's 0.5186 and the baseline's
1.3168 in the same run: 3.77x [3.69, 3.86], 36% of the 128 us ceiling, the pair's best in that run. The
run was host-bound (the baseline read 0.545 ms alone against 1.317 interleaved; the ring measured
0.206-0.212 ms on 2026-11-29), so the % is of this run's figures. Estimated (arithmetic): 0.161-0.168 ms,
76-80%, if its kernels ran at exec_update's 1.02 us (131 us for 128) with the ring's ~30-37 us of other
time a call; a tie with the ring if at the ring's 1.37 us. Measured 7% faster than the ring in the same
run: under the estimate, not a tie. Two more runs (2 x H200 host, 2026-11-30, 20 samples, --gpus all,
the harness's profiled stream probe moved after the timed samples): 0.1927 and 0.1768 ms against the
ring's 0.2238 and 0.2032, the node-update variant's 0.2530 and 0.2320, exec_update's 0.3100 and 0.2647
(baseline 0.9622, 0.8160): 5.33x [3.98, 7.14] and 4.57x [4.19, 4.98], 66.4% and 72.4% of the ceiling,
13-14% faster than the ring, the pair's best in all three runs. The first run's samples followed the
probe, whose first torch-profiler run slows the calls after it for ~2 s (ch01's graph replay 0.164 ->
0.253 ms on an H200): that, not the variant, made it 0.3564 ms. Still under the estimate's 76-80%: the
profile (the pair's ceiling_note) puts its kernels at 1.05 us (135 us a call), the host's template
update the rest.
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
