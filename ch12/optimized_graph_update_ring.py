"""Optimized graph update, template form (CUDA C++): edit the kept graph, update an idle exec from it.

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized: graph_update.cu ``update_template``: per step, c_t goes into the 16 kernel nodes of the
graph kept from setup (cudaGraphKernelNodeSetParams: host-side only, no capture), then one
cudaGraphExecUpdate applies it to the next of 4 execs instantiated from that graph (setup), taken
in turn across calls, and that exec is launched. The profile (H200, 2026-11-29) shows kernels that
a whole-graph update refreshed run 1.00 us, node-by-node exec updates 1.46 us (128 a call: 59 us of
the gap to the ceiling); the capture that made update_exec host-bound (26 us of host work a step)
is gone. The exec updated was last launched 4 launches back: idle unless the host runs 3 launches
ahead (correct either way; launches already queued keep their values). With 4 execs against 8 steps
each update changes its values (c_t, then c_t+4). The call's first node reads x itself (the input copy goes: the ceiling does not count it).
Expect (measured, H200, 2026-11-29; two runs of 20 samples): 0.2060 and 0.2123 ms median (min
0.2019, 0.2080) against optimized_graph_update's 0.2210 and 0.2281: 7% faster, 62% and 56% of the 128
us ceiling (the estimate was 77-85%). The torch profiler shows why: its 128 kernels ran 1.37 us each
(175 us a call), not the 1.00 us estimated: exec_update's (re-capture, whole-graph update) ran 1.02
us, the node-parameter variant's 1.46; a template update into 4 execs sits between the two.
Run: python ch12/optimized_graph_update_ring.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from baseline_graph_update import RecapturedGraph

import aisp
from aisp.kits import native


class RingUpdatedGraph(RecapturedGraph):
    entry = "update_template"
    ring = 4
    """Execs used in turn: more than one so the updated one is idle, and not a multiple of the 8
    steps of a call so each exec's next use brings a different c_t (tests/test_ch12_pairs.py)."""

    def prepare(self) -> None:
        native.check(self.lib.update_ring(self.graph, self.ring), "update_ring")


def get_benchmark() -> aisp.Benchmark:
    return RingUpdatedGraph()


if __name__ == "__main__":
    aisp.main(get_benchmark)
