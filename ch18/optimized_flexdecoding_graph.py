"""Optimized flex decoding in a CUDA graph: the block-mask build and the flex kernels, one launch.

Baseline (baseline_flexdecoding.py): SDPA with a dense additive mask over all 32,768 cache slots.
Optimized: ``optimized_flexdecoding.py``'s step (the per-row window BlockMask from the positions,
then the compiled flex-decoding kernels) captured once in a CUDA graph at setup, after the
compile. The graph reads ``q``, ``pos`` and the cache at fixed addresses, so one ``replay()`` per
call runs the ~8 kernels (mask build, split attention, merge) without ~6 us of host launch each;
the output is copied out of the graph's buffer (256 KB).
Expect (measured, H200, 2026-11-27, whole-chapter run): 1.606 -> 0.2362 ms, 6.81x [6.70, 6.93],
2.27 TB/s, 54.2% of HBM on the window's bytes: the pair's best (eager flex 0.5819 ms). An earlier run
that day: 1.666 -> 0.2392 ms, 7.09x. Its first run (2026-11-26) failed verification: the graph's
output buffer was not declared scratch. 2026-11-29 (H200): 1.397 -> 0.2245 ms, 6.22x [6.14, 6.30], 56.7% of HBM;
``_split`` (optimized_flexdecoding_split.py) 0.1948 ms won.
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
