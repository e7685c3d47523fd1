"""Baseline GPU sampling: each step's logits go to the CPU, where top-p sampling picks the tokens.

Baseline: 8 decode steps of a batch of 8 sequences over a 32k vocabulary: the step's logits
(the per-call input, fp32 on the GPU) are copied to the host (``.cpu()``: a sync and 1 MB over
PCIe), top-p (p = 0.9) runs there (a stable descending sort of 32,000 logits per row, softmax,
cumulative sum, cut), a token is drawn among the kept ones, and the tokens go back to the GPU for
the next step. Sampling is an exponential race, argmax(kept prob / E) with E ~ Exp(1), which
draws exactly from the kept distribution; E comes from a counter-based hash of (seed, step, row,
token), so the CPU and the GPU draw the same numbers and the two variants must agree token for token.
Optimized (optimized_gpu_sampling.py): the same function on the GPU tensors: no copy, no sync;
the tokens never leave the device.
Expect (measured, H200, 2026-11-26): 21.0x [19.6, 22.5] (estimated 10-50x; 2026-11-23: 88.6 -> 4.19
ms, 23x): 70.94 ms with host top-p (~8.9 ms per step, bound by the host sort and sync: 0.12 GB/s
over a 55 GB/s link) vs 3.275 ms on the GPU (~0.41 ms per step, above the ~0.15 ms that ~25 launches
x 5.9 us predict; kernel count not profiled then: see optimized_gpu_sampling.py for the 2026-11-29 profile). Each step's 1 MB of logits is ~0.25 us of HBM time, so
launches, not bytes, bound the optimized variant (graphs or a fused sampling kernel would go
further).
Expect's figures were measured with the softmax, cut and race in fp32. In float64 (H200, 2026-11-28):
87.61 -> 3.389 ms, 25.45x [25.39, 25.51]; the _graph variant 1.91 ms, 45.44x [41.49, 49.76].
Tolerance: tokens exactly. A token differs where the host and the GPU round the cumulative
probability at the cut to either side of p and the token kept on one side only would win the race.
In fp32 the host's softmax alone is off by ~2e-6 (its sum of 32,000 exponentials), and a CPU
simulation (the same math rounded two ways; validated where the rounding is magnified) put a changed
token at 3-6e-6 of rows: 4-8e-4 of runs (128 rows drawn at random a run). In float64 both sides agree to ~1e-12, ~1e-9
of runs. The fp32 draws were also 0 for 64 of 2^31 keys (the uniform rounded to 1), and a dropped
token's 0/0 then won the argmax: a token outside the nucleus in ~0.1% of rows; no float64 draw is 0.
Run: python ch16/baseline_gpu_sampling.py  |  aisp bench run -t ch16:gpu_sampling
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


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
    # baseline's copy to the host is its own cost, not the work's). Latency: one kernel from idle, as
    # the _fused variants run it (every step's logits are given, so one launch serves all 64 rows),
    # priced at its cheapest launch, a one-node graph's replay (_fused_graph); no design does less.
    # Until 2026-12-01 this priced the _graph variant's 233 nodes (0.128 ms); the fused kernel alone
    # takes 61-64 us (H200), so that was not a lower bound of the work.
    return SamplingWorkload(bytes=4.0 * w.steps * w.batch * w.vocab, link="hbm", items=w.steps * w.batch,
                            item_unit="tokens", precision="exact", requires=aisp.Requirements(cuda=True),
                            latency=aisp.LatencyCounts(graph_launches=1),
                            ceiling_note="profiled (ncu, H200): the kernel 64 us of _fused_graph's 0.095 ms call, a row a "
                                         "1,024-thread program on 64 of 132 SMs, SM 20%, DRAM 8%; replay issue ~35 us",
                            window="idle")


WORKLOAD = _workload()


def key_hash(keys: torch.Tensor) -> torch.Tensor:
    """Integer ``keys`` (< 2^31) hashed to integers below 2^31: the same on every device."""
    x = keys
    for mult in (0x2545F491, 0x5851F42D, 0x4C957F2D):
        x = ((x ^ (x >> 15)) * mult) & 0x7FFFFFFF
    return x


def race_noise(keys: torch.Tensor) -> torch.Tensor:
    """Exp(1) draws in float64 from integer ``keys`` (in float64 the uniform stays below 1, so no
    draw is 0)."""
    return -torch.log((key_hash(keys).double() + 0.5) / 2.0**31)


def top_p_race(logits: torch.Tensor, p: float, keys: torch.Tensor) -> torch.Tensor:
    """A token per row (batch,) drawn from the smallest set of most likely tokens reaching
    probability ``p``; ``keys`` (batch, vocab) seed each token's exponential draw. The fp32 logits
    are sorted (their order is the probabilities'); the softmax, the cut and the race run in float64,
    where the host and the GPU agree to ~1e-15 (see Tolerance)."""
    sorted_logits, order = logits.float().sort(dim=-1, descending=True, stable=True)
    sorted_probs = torch.softmax(sorted_logits.double(), dim=-1)
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
