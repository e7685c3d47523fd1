"""Optimized GPU sampling, fused and graphed: ``_fused``'s one Triton kernel, replayed as a one-node CUDA graph.

Baseline (baseline_gpu_sampling.py): per step, logits ``.cpu()`` (sync + 1 MB D2H), top-p on the
host, tokens back to the GPU.
optimized_gpu_sampling_fused.py does the 64 rows' top-p and race in one 77 us kernel, but a call from
idle took 0.197-0.226 ms: the host's issue, 126-157 us of it, is Triton's launcher in Python (binding
and specializing the arguments, the cache lookup: ~47 us warm on the H200's host, more once the other
variants' calls have left the CPU's caches cold).
Optimized here: setup captures that launch once (``StepGraph`` of ch16_decode.py, as ``_graph`` captures
its torch ops); a call replays it. The logits are refilled in place, so the graph reads each call's
own; the tokens are the graph's output buffer. On a CPU the kernel is called directly (the tests).
The same tokens as the baseline, exactly (the harness checks).
Expect (measured, H200, 2026-12-01): 0.1039 ms a call from idle (922.6x [878.3, 969.2]) with the 77 us
kernel; with its compaction by atomics (61 us, ch16_top_p), two runs: 0.0958 and 0.0951 ms, 1294x [1110,
1507] and 1181x [936, 1489] over the baseline (118.9 / 113.8 ms), 2.3x over ``_fused``'s 0.234 / 0.223 ms
in the same runs. The host's issue is 35 us (``_fused``: 168-180 us); the kernel is ~64% of the call.
Run: python ch16/optimized_gpu_sampling_fused_graph.py  |  aisp bench run -t ch16:gpu_sampling
"""

from __future__ import annotations

from ch16_decode import StepGraph
from optimized_gpu_sampling_fused import FusedSampling

import aisp


class GraphedFusedSampling(FusedSampling):
    def setup(self) -> None:
        super().setup()
        self.graph = StepGraph(super().run, lambda: None, self.device)

    def run(self):
        self.graph()
        return self.tokens


def get_benchmark() -> aisp.Benchmark:
    return GraphedFusedSampling()


if __name__ == "__main__":
    aisp.main(get_benchmark)
