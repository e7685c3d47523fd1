"""Baseline tensor-core alignment: a bf16 LM head whose vocabulary (50,257, GPT-2's) is odd.

Baseline: ``F.linear(x, w)`` for 4,096 tokens x 4,096 hidden -> 50,257 logits, bf16. The output's
row stride is 50,257 elements: odd, so no row after the first starts on a 16-byte boundary, and
cuBLAS must pick kernels that store (and tile N) without the aligned 16-byte accesses and TMA
its fastest Hopper kernels use; the last 128-wide column tile is also partly empty.
Optimized (optimized_tensor_core_alignment.py): the weight padded once with zero rows to 50,304
(a multiple of 64, as nanoGPT pads its vocabulary); every row of the output starts aligned, and
the logits are the first 50,257 columns (a view, no copy). The FLOPs are 0.09% more.
Expect (measured, H200, 2026-11-23): 7.30x [7.27, 7.32] (17.04 -> 2.34 ms); the padded GEMM at 720
TFLOP/s, 92% of the bf16 peak.
Run: python ch02/baseline_tensor_core_alignment.py  |  aisp bench run -t ch02:tensor_core_alignment
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class LinearWorkload(aisp.Workload):
    tokens: int = 4096
    hidden: int = 4096
    vocab: int = 50257
    pad_to: int = 64
    """Rows of the weight are padded up to a multiple of this in the optimized variant."""


def _workload(tokens: int = 4096, hidden: int = 4096, vocab: int = 50257) -> LinearWorkload:
    return LinearWorkload(tokens=tokens, hidden=hidden, vocab=vocab, flops=2.0 * tokens * hidden * vocab,
                          bytes=2.0 * (tokens * hidden + hidden * vocab + tokens * vocab),
                          precision="bf16", requires=aisp.Requirements(cuda=True))


WORKLOAD = _workload()


class LmHead(aisp.Benchmark):
    """logits = x @ w.T with w [vocab, hidden] as stored."""

    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.x = torch.randn(w.tokens, w.hidden, generator=gen, device=self.device, dtype=torch.bfloat16)
        self.w = torch.randn(w.vocab, w.hidden, generator=gen, device=self.device, dtype=torch.bfloat16) * w.hidden**-0.5

    def run(self) -> torch.Tensor:
        return F.linear(self.x, self.w)


def get_benchmark() -> aisp.Benchmark:
    return LmHead()


if __name__ == "__main__":
    aisp.main(get_benchmark)
