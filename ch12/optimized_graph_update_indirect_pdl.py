"""Optimized graph update, by reference with programmatic dependent launch (CUDA C++, sm_90).

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized (optimized_graph_update_indirect.py, measured 0.1744 ms, 73.4% of the 128 us ceiling, on a slow
host): one exec per step whose kernels read c_t through a pointer, no update; what is left is the GPU's
chain, 8 graph launches (4.32 us each) and 128 kernels of ~1.05 us (169 us by that arithmetic).
Optimized here: the same execs with each step's 16 launches captured with
``cudaLaunchAttributeProgrammaticStreamSerialization`` (as ``graph_replay``'s ``_pdl``): the graph's edges
are programmatic, so kernel k + 1's blocks are placed while kernel k runs and wait in
``griddepcontrol.wait`` until kernel k has completed and its stores are visible. ``affine_step_ref_pdl``
loads its c_t before the wait (the slots were written before the graph launched; no node writes them),
then its element from L2 (``__ldcg``). Same fmaf, same order: the same bits.
Expect: not yet measured. Estimate (arithmetic, not a measurement): ``graph_replay``'s PDL variant took
its nodes from 1.30-1.49 us to 1.05-1.25 (~0.2 us a node); ~0.2 us off 120 of the 128 kernels (the
first of each graph has no programmatic edge) is ~24 us: 0.145-0.155 ms, 83-88% of the ceiling.
Run: python ch12/optimized_graph_update_indirect_pdl.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from optimized_graph_update_indirect import IndirectGraphs

import aisp


class IndirectGraphsPdl(IndirectGraphs):
    pdl = True


def get_benchmark() -> aisp.Benchmark:
    return IndirectGraphsPdl()


if __name__ == "__main__":
    aisp.main(get_benchmark)
