"""Optimized flex decoding in a CUDA graph: the block-mask build and the flex kernels, one launch.

Baseline (baseline_flexdecoding.py): SDPA with a dense additive mask over all 32,768 cache slots.
Optimized: ``optimized_flexdecoding.py``'s step (the per-row window BlockMask from the positions,
then the compiled flex-decoding kernels) captured once in a CUDA graph at setup, after the
compile. The graph reads ``q``, ``pos`` and the cache at fixed addresses, so one ``replay()`` per
call runs the ~8 kernels (mask build, split attention, merge) without ~6 us of host launch each;
the output is copied out of the graph's buffer (256 KB).
Expect (estimated, not yet measured): ~0.5-0.55 ms against the baseline's 1.598 ms (measured, H200,
2026-11-26), ~3x: the eager flex step measured 0.5825 ms, and the graph removes its ~0.03-0.05 ms of
launches. This variant was not timed in that run: it failed verification (``run()`` changed its inputs
['out']); ``out`` is now declared scratch, and it has not been re-measured since.
Run: python ch18/optimized_flexdecoding_graph.py  |  aisp bench run -t ch18:flexdecoding
"""

from __future__ import annotations

import torch
from optimized_flexdecoding import FlexDecode

import aisp


class GraphedFlexDecode(FlexDecode):
    scratch = ("out",)  # the graph's output buffer, rewritten by every replay

    def prepare(self) -> None:
        super().prepare()
        self.graph = None
        if self.device.type == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.step()

    def run(self) -> torch.Tensor:
        if self.graph is None:
            return self.step()
        self.graph.replay()
        return self.out.clone()


def get_benchmark() -> aisp.Benchmark:
    return GraphedFlexDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
