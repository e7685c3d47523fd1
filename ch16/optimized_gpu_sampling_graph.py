"""Optimized GPU sampling, graphed: the eight steps of top-p sampling replayed as one CUDA graph.

Baseline (baseline_gpu_sampling.py): per step, logits ``.cpu()`` (sync + 1 MB D2H), top-p on the
host, tokens back to the GPU.
optimized_gpu_sampling.py runs the same ``top_p_race`` on the GPU tensors, eagerly: 29 kernels a
step (the sort, the float64 softmax, cumsum and cut, 17 for the hashed draws, gathers, argmax), each
launched from Python, ~0.41 ms a step where the kernels themselves are a few µs: launch-bound.
Here setup captures the eight steps (their keys' ``arange`` included) and the ``stack`` once in a
CUDA graph (``StepGraph`` of ch16_decode.py, the decode-step pattern): a call copies the per-call
logits into the graph's static input (8 MB on the device), replays the graph (one launch, the
declared ``steps x 29 + 1`` nodes) and returns a copy of its tokens. The same math in the same
order: the tokens must match the baseline's exactly. Until 2026-12-01 the workload's latency ceiling
priced this design (1 graph launch and its nodes at ``aisp peak``'s per-node floor, ~0.13 ms on an
H200); optimized_gpu_sampling_fused.py does the work in one 77 us kernel, so it now prices one launch.
Expect (measured, H200, 2026-11-28): 1.91 ms, 45.44x [41.49, 49.76] over the host baseline's 87.61 ms
(eager: 3.389 ms): 6.7% of the 0.128 ms floor (1 graph launch + 233 nodes), so the graphed nodes' own
kernel time, not launches, bounds it. Profiled (torch profiler, H200, 2026-11-29): 1.70 ms of kernels a
call, GPU busy 77% of a 2.26 ms window under the profiler; 377 kernels, 87% under 10 us: the float64
cumsum 23% (~49 us a step), the fp32 radix sort 20% (~42 us a step), the float64 softmax 12% (~25 us
a step), the argmax, gathers and the hashed draws the rest.
Run: python ch16/optimized_gpu_sampling_graph.py  |  aisp bench run -t ch16:gpu_sampling
"""

from __future__ import annotations

import torch
from baseline_gpu_sampling import top_p_race
from ch16_decode import StepGraph
from optimized_gpu_sampling import GPUSampling

import aisp


class GraphedSampling(GPUSampling):
    scratch = ("static", "tokens")
    """The graph's input, filled by each call, and its output, written by each replay."""

    def setup(self) -> None:
        super().setup()
        self.static = self.logits.clone()
        self.tokens = None
        self.graph = StepGraph(self._steps, lambda: None, self.device)

    def _steps(self) -> None:
        """The eight steps on the static logits; at capture, ``tokens`` becomes the graph's output."""
        w = self.workload
        self.tokens = torch.stack([top_p_race(self.static[t], w.top_p, self.keys(t, self.device))
                                   for t in range(w.steps)])

    def run(self) -> torch.Tensor:
        self.static.copy_(self.logits)  # this call's logits (a refilled or poisoned input included)
        self.graph()
        return self.tokens.clone()


def get_benchmark() -> aisp.Benchmark:
    return GraphedSampling()


if __name__ == "__main__":
    aisp.main(get_benchmark)
