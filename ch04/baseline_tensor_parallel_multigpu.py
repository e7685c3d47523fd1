"""Baseline tensor-parallel MLP (2 GPUs): all-gather, two GEMMs, reduce-scatter, one after another.

Baseline: a Megatron-style MLP block with sequence parallelism, bf16: each rank holds 4,096 tokens
of width 4,096 and a column shard of W1 (4,096 x 8,192 of 16,384) and the matching row shard of W2.
Per call: all-gather the tokens (8,192 x 4,096), GELU(x W1_shard) W2_shard, reduce-scatter the
partial sums so each rank gets its own 4,096 tokens' output. Each collective waits for the step
before it, so NVLink idles during the GEMMs (1.1 TFLOP per rank, ~1.4 ms) and the tensor cores
idle during the all-gather and reduce-scatter (64 MB buffers each).
Optimized (optimized_tensor_parallel_multigpu.py): PyTorch's symmetric-memory fused all-gather-
matmul and matmul-reduce-scatter (copy-engine gather beside the GEMM, chunked reduce), replayed as
one CUDA graph.
Expect (measured, 2 x H200, 2026-11-27): 1.912 -> 1.693 ms, 1.13x [1.07, 1.19]; in the whole-chapter
run 2.303 -> 2.134 ms, 1.08x [1.04, 1.12]. The GEMMs are ~1.4 ms of the ~1.87 ms GPU span and the
collectives ~0.32 ms (profiled): overlap can hide at most ~17%. Overlaps that run NCCL kernels
beside the GEMMs measured slower (0.86-0.93x since 2026-11-26): they slow the GEMMs more than they
hide; the optimized file lists them.
Run: aisp bench run -t ch04:tensor_parallel_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from ch04_common import DTYPES, TWO_RANKS, gather_into, own, rank_device, scatter_reduced, shared

import aisp
from aisp.kits.multirank import world_and_rank


@dataclass(frozen=True, kw_only=True)
class TensorParallelWorkload(aisp.Workload):
    tokens_per_rank: int = 4096
    hidden: int = 4096
    ffn: int = 16384
    world: int = 2
    dtype: str = "bf16"


def tp_workload(requires: aisp.Requirements = TWO_RANKS, **kw: object) -> TensorParallelWorkload:
    """FLOPs summed over the ranks: each rank's two GEMMs over all world x tokens_per_rank tokens with
    1/world of the FFN, i.e. the whole FFN's over every token."""
    w = TensorParallelWorkload(**kw)
    rows = w.world * w.tokens_per_rank
    return TensorParallelWorkload(**kw, flops=2 * 2.0 * rows * w.hidden * w.ffn, items=rows,
                                  item_unit="tokens", precision=w.dtype, requires=requires, timeout_s=240,
                                  ceiling_note="collectives ~0.32 of a ~1.87 ms GPU span: at most ~17% to hide (profiled)")


WORKLOAD = tp_workload()


class BlockingTensorParallel(aisp.Benchmark):
    workload: TensorParallelWorkload = WORKLOAD
    inputs = ("x",)
    scratch = ("gathered",)

    def setup(self) -> None:
        w, dtype = self.workload, DTYPES[self.workload.dtype]
        self.device = rank_device(self)
        world, rank = world_and_rank()
        cols = slice(rank * w.ffn // world, (rank + 1) * w.ffn // world)
        gen = shared(self)
        w1 = torch.randn(w.hidden, w.ffn, generator=gen, device=self.device) / w.hidden**0.5
        w2 = torch.randn(w.ffn, w.hidden, generator=gen, device=self.device) / w.ffn**0.5
        self.w1, self.w2 = w1[:, cols].to(dtype).contiguous(), w2[cols].to(dtype).contiguous()
        self.x = torch.randn(w.tokens_per_rank, w.hidden, generator=own(self), device=self.device).to(dtype)
        self.world = world
        self.prepare()

    def prepare(self) -> None:
        self.gathered = self.x.new_empty(self.world * self.workload.tokens_per_rank, self.workload.hidden)

    def mlp(self, tokens: torch.Tensor) -> torch.Tensor:
        """This rank's partial sum of the block's output for ``tokens`` (reduced across ranks next)."""
        return F.gelu(tokens @ self.w1, approximate="tanh") @ self.w2

    def run(self) -> torch.Tensor:
        gather_into(self.gathered, self.x)
        out = torch.empty_like(self.x)
        scatter_reduced(out, self.mlp(self.gathered))
        return out


def get_benchmark() -> aisp.Benchmark:
    return BlockingTensorParallel()


if __name__ == "__main__":
    aisp.main(get_benchmark)
