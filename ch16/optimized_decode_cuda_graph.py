"""Optimized decode CUDA graph: the decode step captured once, replayed per token.

Baseline (baseline_decode_cuda_graph.py): 31 eager decode steps of ~250 kernel launches each
(~1.5 ms per step, launch-bound).
Optimized: at setup the step is captured in a CUDA graph over static buffers (``GraphedDecode``):
token and position in, greedy token and top logits out, the KV cache at a fixed address, and
attention over the cache's full 543 slots (a fixed shape; slots after a row's position masked).
The graph feeds its token back into its input buffer, so a step is one ``replay()`` plus two
small copies of its outputs: the GPU runs the ~250 kernels back to back (~1.2 µs each to start in
a graph) with no host launch per kernel. The prefill stays eager (one forward; launches amortized
over 4,096 tokens).
Expect (measured, H200, 2026-11-26): 24.6 ms vs 110.0 ms eager, 4.49x [4.29, 4.70] (estimated 3-5x;
6.41x on 2026-11-23, before the kit's eager steps shed ~30% of their host ops and the baseline got
faster); at most ~0.79 ms per step (the call includes the eager prefill), 354 GB/s = 8.4% of HBM
against a ~0.07 ms floor per step: the rest is small kernels' fixed cost (next: fewer, fused
kernels, e.g. torch.compile). On 2026-11-29 (H200, a host whose eager issue path ran ~2x slower):
29.47 ms (p10-p90 25.6-30.3), 7.0% of HBM, vs 266.6 ms eager, 8.86x [6.36, 12.34]; see the baseline's header.
Run: python ch16/optimized_decode_cuda_graph.py  |  aisp bench run -t ch16:decode_cuda_graph
"""

from __future__ import annotations

import torch
from baseline_decode_cuda_graph import EagerDecode
from ch16_decode import GraphedDecode

import aisp


class GraphDecode(EagerDecode):
    def setup(self) -> None:
        super().setup()
        w = self.workload
        self.step = GraphedDecode(self.model, self.cache, w.batch, w.prompt + w.steps)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.step.generate(*self.first_token(), self.workload.prompt, self.workload.steps)


def get_benchmark() -> aisp.Benchmark:
    return GraphDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
