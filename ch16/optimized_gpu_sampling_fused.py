"""Optimized GPU sampling, fused: the 64 rows' top-p and race in one Triton kernel, no sort of the vocabulary.

Baseline (baseline_gpu_sampling.py): per step, logits ``.cpu()`` (sync + 1 MB D2H), top-p on the
host, tokens back to the GPU.
optimized_gpu_sampling_graph.py replays the same torch ops as one CUDA graph of 233 nodes: a radix
sort of each row, a float64 softmax and cumsum over all 32,000 sorted probabilities, 17 elementwise
kernels for the hashed draws. Their own time bounds it (1.70 ms of kernels a call, profiled).
Optimized here: ``ch16_top_p.top_p_race_rows``, one program a row for the 8 steps x 8 sequences
(the steps' logits are all given, so one launch does them all): the row's max and float64 softmax sum,
a bisection on the logits' order keys for a floor with 768 to 1,024 tokens above it (counts only),
those sorted with their indices (the stable order), then the reference's probabilities, running sum,
cut and race on them alone. A row whose candidates do not reach p takes an exact slow path.
The same tokens as the baseline, exactly (the harness checks): see ch16_top_p for the rounding.
Expect (measured, H200, 2026-12-01): 0.226 ms a call from idle, 489x [425, 562] over the baseline and
8.5x over the graph's 1.92 ms. The kernel was 77 us (ncu); the rest is the host issuing it from idle
(157 us, as long as the graph's replay call). First version (1-D row, one scan over it): 105 us. With the
candidates compacted by atomics (61 us back to back): 0.234 / 0.223 ms, 531x / 524x, the host's issue
168-180 us of it; optimized_gpu_sampling_fused_graph.py replays the launch as a graph (0.095 ms).
Run: python ch16/optimized_gpu_sampling_fused.py  |  aisp bench run -t ch16:gpu_sampling
"""

from __future__ import annotations

import torch
from baseline_gpu_sampling import CPUSampling
from ch16_top_p import BUFFER, top_p_race_rows

import aisp


class FusedSampling(CPUSampling):
    scratch = ("tokens", "buffer")

    def setup(self) -> None:
        super().setup()
        w = self.workload
        self.p = torch.tensor([w.top_p], dtype=torch.float64, device=self.device)
        self.tokens = torch.empty(w.steps, w.batch, dtype=torch.int64, device=self.device)
        self.buffer = torch.empty(w.steps * w.batch * BUFFER, dtype=torch.int64, device=self.device)
        self.first_row = (self.seed % 64) * w.steps * w.batch  # keys(t)'s start, in rows of the vocabulary

    def run(self) -> torch.Tensor:
        w = self.workload
        top_p_race_rows(self.logits.view(w.steps * w.batch, w.vocab), self.p, self.first_row, self.tokens.view(-1),
                        self.buffer)
        return self.tokens


def get_benchmark() -> aisp.Benchmark:
    return FusedSampling()


if __name__ == "__main__":
    aisp.main(get_benchmark)
