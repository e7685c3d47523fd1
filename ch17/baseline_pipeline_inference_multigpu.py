"""Baseline pipeline inference (2 GPUs): a 2-stage layer split runs one whole batch at a time.

Baseline: a model of 8 blocks (Linear(8192, 8192) + GELU each, bf16) split by layers over two GPUs,
4 blocks per stage, serves a batch of 8,192 tokens (e.g. 16 prompts of 512 tokens in one prefill):
rank 0 runs its 4 blocks on the whole batch and sends the 128 MiB of activations to rank 1 over NVLink
(``dist.send``), rank 1 receives them and runs its 4 blocks. Naive model parallelism: while rank 0
computes, rank 1 waits, and then the reverse; each GPU idles half the call. Bubble fraction (the
share of the call a stage idles, ``metrics()``): (p - 1) / (m + p - 1) with p = 2 stages and m = 1
batch: 50%.
Optimized (optimized_pipeline_inference_multigpu.py): the batch in 8 micro-batches of 1,024 tokens;
rank 0 sends micro-batch i (``isend``) while it computes i + 1, rank 1 computes i while i + 1 is
on the link: both GPUs busy except the first and last micro-batch, bubble 1/9 = 11%.
Ceiling: bf16 tensor cores of both GPUs (4.4 TFLOP per rank per call, 8.8 in all: ~5.6 ms at 2 x 783
TFLOP/s); the workload declares both stages' FLOPs, held to 2 x one GPU's peak, so the bubble shows.
Expect (measured, 2 x H200, 2026-11-27): 12.77 -> 9.762 ms, 1.31x [1.29, 1.32] (estimated ~12-13 ->
~7-7.5 ms, 1.7-1.8x); bubble 50% -> 11%, 345 -> 451 TFLOP/s per rank (44% -> 57% of bf16 peak):
8 micro-batches of 1,024 rows run their GEMMs below the whole batch's rate, and the sends add time.
Tolerance: bf16 defaults (a 1,024-row GEMM and an 8,192-row GEMM may round differently).
Run: aisp bench run -t ch17:pipeline_inference_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from ch17_ep import TWO_RANKS
from torch import nn

import aisp
from aisp.kits.multirank import world_and_rank

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


@dataclass(frozen=True, kw_only=True)
class PipelineWorkload(aisp.Workload):
    width: int = 8192
    blocks_per_stage: int = 4
    batch: int = 8192
    """Tokens served in one call."""
    micro_batches: int = 8
    """Micro-batches of the optimized schedule (the batch must divide by it)."""
    dtype: str = "bf16"


def pipeline_workload(requires: aisp.Requirements = TWO_RANKS, **kw: object) -> PipelineWorkload:
    w = PipelineWorkload(**kw)
    assert w.batch % w.micro_batches == 0
    stages = requires.world_size  # one stage a rank: FLOPs summed over the ranks
    return PipelineWorkload(**kw, flops=2.0 * w.batch * stages * w.blocks_per_stage * w.width ** 2, items=w.batch,
                            item_unit="tokens", precision=w.dtype, requires=requires)


WORKLOAD = pipeline_workload(
    ceiling_note="profiled (torch profiler, 2xH200): GEMMs 5.97-6.13 ms a rank (the FLOP bound is 5.62), "
                 "sends 1.53-1.81 ms and the bubble not hidden, GELU 0.4")


def bubble(stages: int, micro_batches: int) -> float:
    """Share of a call each stage idles when ``micro_batches`` flow through ``stages`` in order."""
    return (stages - 1) / (micro_batches + stages - 1)


class PipelineStage(aisp.Benchmark):
    """Rank r holds blocks r * n .. (r + 1) * n - 1 (drawn alike on every rank, each keeps its own).
    Input ``x`` (batch, width): the first stage reads it. Returns this stage's output (batch, width)."""

    workload: PipelineWorkload = WORKLOAD
    inputs = ("x",)
    micro_batches = 1

    def setup(self) -> None:
        w, (self.world, self.rank) = self.workload, world_and_rank()
        assert self.world == 2, f"two stages: a world of {self.world}"
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        dev, dtype = self.device, DTYPES[w.dtype]
        gen = torch.Generator(device=dev).manual_seed(self.seed * 7919)
        stages = []
        for _ in range(self.world):
            layers = []
            for _ in range(w.blocks_per_stage):
                lin = nn.Linear(w.width, w.width, bias=False, device=dev, dtype=dtype)
                lin.weight.data.copy_(torch.randn(w.width, w.width, generator=gen, device=dev) * (2.0 / w.width) ** 0.5)
                layers += [lin, nn.GELU()]
            stages.append(nn.Sequential(*layers).requires_grad_(False))
        self.stage = stages[self.rank]
        self.x = torch.randn(w.batch, w.width, generator=gen, device=dev).to(dtype)

    def run(self) -> torch.Tensor:
        if self.rank == 0:
            out = self.stage(self.x)
            dist.send(out, 1)
            return out
        got = torch.empty_like(self.x)
        dist.recv(got, 0)
        return self.stage(got)

    def metrics(self) -> dict[str, float]:
        return {"bubble_fraction": bubble(self.world, self.micro_batches)}


def get_benchmark() -> aisp.Benchmark:
    return PipelineStage()


if __name__ == "__main__":
    aisp.main(get_benchmark)
