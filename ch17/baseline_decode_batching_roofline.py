"""Baseline decode batching: 64 running requests each get their next token from a forward of their own (batch 1).

Baseline: 64 requests, each with a 512-token context already in the KV cache, are decoded one
request at a time: 64 forwards of a wide decoder (two blocks of a 70B-class layer, 2.24B
parameters, bf16: 3.95 GB of weights per forward; ch17_serving.WIDE) at batch 1. Each forward
multiplies every weight by one token's activations, 2 FLOPs per 2 bytes read: arithmetic intensity
~1 FLOP/byte, far left of the H200's ridge (783 TFLOP/s / 4.2 TB/s = ~186 FLOP/B), so each step runs
at the HBM rate and the tensor cores idle. 64 x 3.95 GB = 253 GB read per call.
Optimized (optimized_decode_batching_roofline.py): one forward over all 64 requests (the kit's
batched decode: one GEMM per weight matrix with 64 rows, per-row positions and cache masks). The
weights are read once for all 64 tokens: 4.2 GB per call (weights + the 0.27 GB of KV), intensity
~60 FLOP/B (the metric: 60.4): ~60x further right on the roofline, still under the ridge, so still
HBM-bound; a batch of ~190 or more would cross into the compute-bound region. Metrics:
``weight_reads`` per call and the ``intensity_flop_per_byte`` each variant achieves (the workload's
FLOPs over the bytes it reads).
Ceiling: HBM (workload bytes: weights once plus the KV the batch attends to).
Expect (measured, H200, 2026-11-26): 109.2 -> 2.337 ms, 53.1x [38.6, 73.1] (estimated 65-90 -> 1.2-1.6
ms, 45-65x): 64 weight reads -> 1, intensity 1.0 -> 60.4 FLOP/B (still left of the ridge).
The batched step reaches 1,804 GB/s, 42.7% of HBM (estimated 70-85%); the baseline moves ~2.3 TB/s of
weights (0.9% on the workload's bytes). What holds the batched step at 43% is not yet profiled.
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits at the bf16
defaults (a 1-row and a 64-row GEMM round differently).
Run: python ch17/baseline_decode_batching_roofline.py  |  aisp bench run -t ch17:decode_batching_roofline
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch17_serving import GPU_SIZED, WIDE

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from aisp.kits.llm.serving import dtype_on, weight_bytes


@dataclass(frozen=True, kw_only=True)
class BatchingWorkload(aisp.Workload):
    model: LLMConfig = WIDE
    requests: int = 64
    """Running requests, each decoding its next token."""
    context: int = 512
    """Tokens already in each request's KV cache."""

    def kv_bytes(self) -> float:
        return self.requests * (self.context + 1) * self.model.kv_bytes_per_token()


def batching_workload(**kw: object) -> BatchingWorkload:
    w = BatchingWorkload(**kw)
    return BatchingWorkload(**kw, flops=w.model.forward_flops(w.requests, w.context + 1),
                            bytes=weight_bytes(w.model) + w.kv_bytes(), items=w.requests, item_unit="tokens",
                            precision="bf16", requires=GPU_SIZED, timeout_s=400)


WORKLOAD = batching_workload(ceiling_note="profiled (torch profiler, H200): _compiled 1.322 ms of kernels (90% busy): GEMMs 1.01 at DRAM 81-84%, cuDNN attention 0.132 (2.0 TB/s), top-k/index/norms 0.18")


class OneAtATime(aisp.Benchmark):
    """Input ``tokens`` (requests,): each request's last token; the cache holds its context (state).
    Returns each request's next token (requests,) and its top logits (requests, TOP)."""

    workload: BatchingWorkload = WORKLOAD
    inputs = ("tokens",)
    state = ("cache_k", "cache_v")

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.model = build_decoder(w.model, self.seed, dev, draw_on_device=dev.type == "cuda")
        self.cache = DenseKVCache(w.model, w.requests, w.context + 1, dev, dtype_on(dev))
        self.cache_k, self.cache_v = self.cache.k, self.cache.v
        prompts = torch.randint(w.model.vocab, (w.requests, w.context), generator=gen, device=dev)
        self.rows = torch.arange(w.requests, device=dev)
        for start in range(0, w.requests, 8):  # the running requests' prefill (8 at a time: activation memory)
            prefill(self.model, self.cache, list(prompts[start:start + 8]), self.rows[start:start + 8])
        self.tokens = torch.randint(w.model.vocab, (w.requests,), generator=gen, device=dev)
        self.positions = torch.full((w.requests, 1), w.context, device=dev)

    def forward(self, rows: slice) -> torch.Tensor:
        """Logits (len(rows), vocab) of the next token of requests ``rows``, in one forward."""
        pos = self.positions[rows]
        every = rows == slice(None)  # all rows: the cache's first ones, read in place (no gather)
        step = self.cache.bind(pos, self.workload.context + 1, None if every else self.rows[rows])
        return self.model(self.tokens[rows, None], pos, step)[:, 0]

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        steps = [greedy_top(self.forward(slice(i, i + 1)), TOP) for i in range(self.workload.requests)]
        return torch.cat([t for t, _ in steps]), torch.cat([v for _, v in steps])

    def weight_reads(self) -> int:
        """Times one call reads the weights: once per forward."""
        return self.workload.requests

    def metrics(self) -> dict[str, float]:
        w = self.workload
        read = self.weight_reads() * weight_bytes(w.model) + w.kv_bytes()
        return {"weight_reads": float(self.weight_reads()), "intensity_flop_per_byte": w.flops / read}


def get_benchmark() -> aisp.Benchmark:
    return OneAtATime()


if __name__ == "__main__":
    aisp.main(get_benchmark)
