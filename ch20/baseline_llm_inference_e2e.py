"""Baseline LLM inference, end to end: static batches, every decode step recomputes the whole sequence.

Case study, stage 0 of 4. A 0.84B-parameter decoder (4 blocks of width 4096, GQA 32/8 heads,
SwiGLU 11,008; bf16) serves 24 requests (prompts ~64 tokens, log-normal up to 192; outputs ~16,
up to 64), 8 at a time in arrival order, greedy, the way a first `generate(batch)` loop without a
KV cache does: each step runs the model over every row's prompt and generated tokens (right
padded, causal, so padding never reaches a real token) and keeps the logits of each row's last
position. Step t of a batch recomputes every key and value of steps 0..t-1: ~2 TFLOP per step
where a cached decode step needs ~14 GFLOP and one read of the 1.68 GB of weights.
Deliberately naive: this is the case study's starting point; its headline is the last stage's
share of the HBM-bound decode rate (see the README), not the ratio to this baseline.
Optimized, cumulatively (each file's header names the chapter the technique comes from):
  s1_kv_cache            a KV cache: one prefill, then one token per row per step (ch15)
  s2_cuda_graph          the cache reserved once, the decode step captured in a CUDA graph (ch16, ch12)
  s3_fp8_weights         e4m3 weights with per-channel scales, half the bytes per step (ch16, ch13)
  s4_continuous_batching finished requests leave; free slots refilled 4 at a time (ch15)
Expect (measured, H200, 2026-11-26): 480.9 ms per call [p10 477, p90 487.9] (estimated ~0.5 s):
128 padded steps of up to ~1,600 tokens, 7.2 TFLOP/s (the recomputed work is not counted).
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits at the
fp8 defaults, the precision of the last stage (one workload serves every stage; the bf16 stages
sit well inside it).
Run: python ch20/baseline_llm_inference_e2e.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

import torch
from ch20_llm import ServeStream, e2e_workload

import aisp
from aisp.kits.llm import TOP, Generated, finish, greedy_top
from aisp.kits.llm.engine import on_device

WORKLOAD = e2e_workload(precision="fp8", requires=aisp.Requirements(cuda=True, packages=("triton",)), timeout_s=600,
                        ceiling_note="profiled (torch profiler, H200): s3 GPU busy 85%, 96.7 ms of kernels over 128 padded steps: "
                                    "fp8 GEMMs 39% (1.56x bf16's), casts + widening 15%")


class RecomputeDecode(ServeStream):
    """Serves the stream; returns (tokens (requests, longest output), top logits (..., TOP))."""

    workload = WORKLOAD

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        out = Generated.empty(self.requests, self.device)
        for start in range(0, len(self.requests), self.workload.slots):
            group = self.requests[start:start + self.workload.slots]
            finish(out, group, self.generate(group))
        return out.as_tuple()

    def generate(self, group: list) -> list[tuple[torch.Tensor, torch.Tensor]]:
        lens = [len(r.prompt) for r in group]
        longest_out = max(r.output_len for r in group)
        seq = torch.zeros(len(group), max(lens) + longest_out, dtype=torch.long, device=self.device)
        for i, r in enumerate(group):
            seq[i, :lens[i]] = r.prompt
        rows = torch.arange(len(group), device=self.device)
        last = on_device([n - 1 for n in lens], self.device)
        steps = []
        for t in range(longest_out):
            n = max(lens) + t
            positions = torch.arange(n, device=self.device).expand(len(group), n)
            hidden = self.model.hidden(seq[:, :n], positions)[rows, last + t]
            token, top = greedy_top(self.model.head(hidden), TOP)
            seq[rows, last + t + 1] = token
            steps.append((token, top))
        return steps


def get_benchmark() -> aisp.Benchmark:
    return RecomputeDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
