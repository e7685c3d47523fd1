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
Expect: not yet measured. Estimate (arithmetic, not a measurement): 128 kernels at the 1.00 us the
profile gives whole-graph-updated nodes = 128 us; before the first, ~17 us (16 node sets at ~0.4 us,
one update at ~5 us: update_exec's 26 us of host a step less its capture, a launch, its latency);
1-3 us at each of 7 launch boundaries, the host ahead (~14 us a step against 16 us of kernels):
0.150-0.166 ms, 77-85% of the 128 us latency ceiling (node updates: 0.214 ms, 59.9%). If a node
set costs the 0.9 us of an exec node set, the host is the limit (~22 us a step): ~0.19 ms (67%).
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
