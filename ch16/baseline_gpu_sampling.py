"""Baseline GPU sampling: each step's logits go to the CPU, where top-p sampling picks the tokens.

Baseline: 8 decode steps of a batch of 8 sequences over a 32k vocabulary: the step's logits
(the per-call input, fp32 on the GPU) are copied to the host (``.cpu()``: a sync and 1 MB over
PCIe), top-p (p = 0.9) runs there (softmax, a stable descending sort of 32,000 probabilities per
row, cumulative sum, cut), a token is drawn among the kept ones, and the tokens go back to the GPU
for the next step. Sampling is an exponential race, argmax(kept prob / E) with E ~ Exp(1), which
draws exactly from the kept distribution; E comes from a counter-based hash of (seed, step, row,
token), so the CPU and the GPU draw the same numbers and the two variants must agree token for token.
Optimized (optimized_gpu_sampling.py): the same function on the GPU tensors: no copy, no sync;
the tokens never leave the device.
Expect (measured, H200, 2026-11-26): 21.0x [19.6, 22.5] (estimated 10-50x; 2026-11-23: 88.6 -> 4.19
ms, 23x): 70.94 ms with host top-p (~8.9 ms per step, bound by the host sort and sync: 0.12 GB/s
over a 55 GB/s link) vs 3.275 ms on the GPU (~0.41 ms per step, above the ~0.15 ms that ~25 launches
x 5.9 us predict; kernel count not profiled). Each step's 1 MB of logits is ~0.25 us of HBM time, so
launches, not bytes, bound the optimized variant (graphs or a fused sampling kernel would go
further).
Tolerance: tokens exactly. The CPU and GPU round softmax and cumsum differently in the last bit,
which could flip a token only if its cumulative probability lands within ~1e-7 of p.
Run: python ch16/baseline_gpu_sampling.py  |  aisp bench run -t ch16:gpu_sampling
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp

SAMPLING_KERNELS = 28
"""Kernels of one ``top_p_race`` step plus its keys' ``arange``: the non-view aten ops it dispatches
(softmax, sort, cumsum, the cut, 17 for the hashed draws, gathers, argmax), counted on a CPU
(tests/test_latency_ceilings.py recounts them)."""


@dataclass(frozen=True, kw_only=True)
class SamplingWorkload(aisp.Workload):
    steps: int = 8
    batch: int = 8
    vocab: int = 32000
    top_p: float = 0.9
    spread: float = 4.0
    """Standard deviation of the logits (a peaked next-token distribution)."""


def _workload() -> SamplingWorkload:
    w = SamplingWorkload()
    # Bytes: the logits read once from device memory (the best design samples where they are; the
    # baseline's copy to the host is its own cost, not the work's). Latency: the optimized launches
    # each step's SAMPLING_KERNELS eagerly, then one stack; the best design replays them as one graph
    # (1 launch, steps x SAMPLING_KERNELS + 1 nodes): no copy, no sync.
    return SamplingWorkload(bytes=4.0 * w.steps * w.batch * w.vocab, link="hbm", items=w.steps * w.batch,
                            item_unit="tokens", precision="exact", requires=aisp.Requirements(cuda=True),
                            latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=w.steps * SAMPLING_KERNELS + 1),
                            ceiling_note="eager: 28 kernels at ~0.41 ms a step (~15 us a launch vs a 5.84 us floor)",
                            window="idle")


WORKLOAD = _workload()


def race_noise(keys: torch.Tensor) -> torch.Tensor:
    """Exp(1) draws from integer ``keys`` (< 2^31) by an integer hash: the same on every device."""
    x = keys
    for mult in (0x2545F491, 0x5851F42D, 0x4C957F2D):
        x = ((x ^ (x >> 15)) * mult) & 0x7FFFFFFF
    return -torch.log((x.float() + 0.5) / 2.0**31)


def top_p_race(logits: torch.Tensor, p: float, keys: torch.Tensor) -> torch.Tensor:
    """A token per row (batch,) drawn from the smallest set of most likely tokens reaching
    probability ``p``; ``keys`` (batch, vocab) seed each token's exponential draw."""
    probs = torch.softmax(logits.float(), dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    kept = sorted_probs.masked_fill(before >= p, 0.0)
    pick = (kept / race_noise(keys).gather(-1, order)).argmax(dim=-1, keepdim=True)
    return order.gather(-1, pick).squeeze(-1)


class CPUSampling(aisp.Benchmark):
    """Returns the sampled tokens (steps, batch)."""

    workload: SamplingWorkload = WORKLOAD
    inputs = ("logits",)

    def setup(self) -> None:
        w = self.workload
        self.logits = w.spread * torch.randn(w.steps, w.batch, w.vocab, generator=self.generator(), device=self.device)

    def keys(self, step: int, device: torch.device) -> torch.Tensor:
        """(batch, vocab) hash keys of this step, distinct per seed, step, row and token."""
        w = self.workload
        start = ((self.seed % 64) * w.steps + step) * w.batch * w.vocab
        return torch.arange(start, start + w.batch * w.vocab, device=device).view(w.batch, w.vocab)

    def run(self) -> torch.Tensor:
        w, tokens = self.workload, []
        for t in range(w.steps):
            host = self.logits[t].cpu()
            tokens.append(top_p_race(host, w.top_p, self.keys(t, host.device)).to(self.device))
        return torch.stack(tokens)


def get_benchmark() -> aisp.Benchmark:
    return CPUSampling()


if __name__ == "__main__":
    aisp.main(get_benchmark)
