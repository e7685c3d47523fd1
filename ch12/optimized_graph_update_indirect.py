"""Optimized graph update, by reference (CUDA C++): no update at all; each step's graph reads its c_t from memory.

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized (optimized_graph_update_template.py, the best measured before: 0.1768-0.1927 ms, 66-72% of the
128 us ceiling): per step, c_t set in the kept graph's 16 nodes and one cudaGraphExecUpdate, then the
launch; profiled, its 128 kernels run 1.05 us each (135 us a call) and the host's updates take the rest.
Optimized here: the argument that changes is moved out of the graph. ``update_slots`` (setup) captures
and instantiates one exec per step whose 16 kernels (``affine_step_ref``) read c_t through a pointer to
that step's slot in device memory. A call launches one small kernel that writes the 8 c_t into the slots
and copies the input into the output (its arguments are copied at launch, so the caller's coefficients
may change right after), then the 8 execs in order: no capture, no node update, no exec update. Each
kernel loads *c beside its own element (two independent loads, one latency). Same fmaf, same order:
the same bits as the other variants.
The lesson's last step: where a graph's argument changes at every launch, a pointer to it does not.
Estimate (arithmetic, before the run): the GPU's 128 kernels at the profiled 1.05 us (134 us), the call's
first kernel and launch from idle ~5-10 us, the host's 8 launches (~2-3 us each) well under the GPU's 17 us
a step: 0.140-0.155 ms, 83-91% of the ceiling.
Expect: measured (H200, one GPU, 2026-11-30, one run of 20 samples, a host whose torch dispatch read 6.7 us
against the stored runs' 2.8): 0.1744 ms (min 0.1576), 73.4% of the 128 us ceiling, the pair's best in that
run, against _template's 0.1836 (69.7%), the ring's 0.2090 and the baseline's 0.8164: 5% faster than
_template, short of the estimate. Arithmetic from the ceiling's own floors: 8 graph launches at 4.32 us
plus 128 kernels at the profiled 1.05 us is 169 us, so the kernels' length, not the host, is what is left
(optimized_graph_update_indirect_pdl.py takes their launches off the chain).
Run: python ch12/optimized_graph_update_indirect.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from baseline_graph_update import RecapturedGraph

import aisp
from aisp.kits import native


class IndirectGraphs(RecapturedGraph):
    entry = "update_indirect"
    pdl = False
    """Whether the chains' edges are programmatic (optimized_graph_update_indirect_pdl.py)."""

    def prepare(self) -> None:
        native.check(self.lib.update_slots(self.graph, self.workload.steps, int(self.pdl)), "update_slots")


def get_benchmark() -> aisp.Benchmark:
    return IndirectGraphs()


if __name__ == "__main__":
    aisp.main(get_benchmark)
