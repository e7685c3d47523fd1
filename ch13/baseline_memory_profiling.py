"""Baseline memory: gradient accumulation that keeps every micro-batch's graph alive.

Baseline: eight micro-batches of different lengths are summed into one loss tensor and
backward runs once at the end. Summing loss tensors (not their values) keeps each micro-batch's
autograd graph, with all its saved activations, alive until that single backward: peak memory
grows with the number of micro-batches. This is the classic "leak" ``memory_stats()`` exposes:
``allocated_bytes.all.peak`` climbs with every micro-batch.
Optimized (optimized_memory_profiling.py): backward per micro-batch on ``loss / n`` and keep
only ``loss.detach()``: each graph is freed as soon as its gradients are accumulated. Same
gradients (sums in a different order), one micro-batch's activations at a time.
Expect: peak memory several times lower (headline: memory); time about the same. Measured on
our H200: 4.38 -> 1.10 GiB peak (4.0x), 80.0 ms both.
Tolerance: fp32 in both; the gradients are the same sums accumulated in another order, so they
agree to fp32 rounding: rtol 1e-4 with element_tol 1e-5 (gradient entries are ~1e-4..1e-2: 1e-7 absolute).
See also: ``python ch13/memory_profiling.py --dump`` (allocator statistics, fragmentation and a
memory snapshot of both variants under default and recommended allocator settings).
Run: python ch13/baseline_memory_profiling.py  |  aisp bench run -t ch13:memory_profiling
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import aisp
from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches


@dataclass(frozen=True, kw_only=True)
class AccumulationWorkload(aisp.Workload):
    model: GPTConfig = field(default_factory=GPTConfig)
    """The model whose gradients are accumulated."""
    batch: int = 8
    """Sequences per micro-batch."""
    lengths: tuple[int, ...] = (512, 384, 448, 256, 512, 320, 448, 384)
    """Sequence length of each micro-batch (varied, as with packed or bucketed data)."""


def least_resident_bytes(w: AccumulationWorkload) -> int:
    """The fewest bytes any correct design of this run() holds on the GPU at once: at its end, the
    fp32 parameters, the fp32 gradients it returns (every one at once: they are the output), each
    micro-batch's token inputs (int64) and the micro-batches' fp32 losses. A floor: activations and
    logits are left out (one micro-batch's at a time, and recompute or a chunked loss can drop most)."""
    tokens = w.batch * sum(w.lengths)
    return 2 * 4 * w.model.params() + 2 * 8 * tokens + 4 * len(w.lengths)


def _workload() -> AccumulationWorkload:
    w = AccumulationWorkload(model=GPTConfig(vocab=8192, seq=512, dim=512, heads=8, layers=4))
    flops = sum(w.model.train_flops(w.batch, n) for n in w.lengths)
    tokens = w.batch * sum(w.lengths)
    return AccumulationWorkload(model=w.model, flops=flops, items=tokens, item_unit="tokens",
                                precision="fp32", rtol=1e-4, element_tol=1e-5, headline="memory",
                                resident_bytes=least_resident_bytes(w),  # capacity floor, derived above
                                ceiling_note=("profiled (memory, H200): peak 1.24 GiB: grads 0.36, a micro-batch's MLP 0.31, "
                                              "QKV, logits and the loss's fp32 copy 0.13 each, inputs 0.08"),
                                requires=aisp.Requirements(cuda=True))


WORKLOAD = _workload()


class SummedLossAccumulation(aisp.Benchmark):
    """Accumulates gradients over the micro-batches; returns their losses and the gradients."""

    workload = WORKLOAD
    inputs = ("idx", "targets")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.model = init_weights_(GPT(w.model).to(self.device), gen)
        self.idx, self.targets = zip(*(token_batches(w.model, (w.batch, n), gen, self.device) for n in w.lengths),
                                     strict=True)

    def run(self) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        self.model.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        losses = []
        for idx, targets in zip(self.idx, self.targets, strict=True):
            _, loss = self.model(idx, targets)
            total = total + loss / len(self.idx)
            losses.append(loss)
        total.backward()
        return torch.stack(losses).detach(), tuple(p.grad for p in self.model.parameters())


def get_benchmark() -> aisp.Benchmark:
    return SummedLossAccumulation()


if __name__ == "__main__":
    aisp.main(get_benchmark)
