"""Baseline async scheduling: host batch preparation, GPU step, sync, output processing, in turn.

Baseline: a server loop over 64 running requests (the chapter's 156M decoder, a paged KV cache of
16-token pages, prompts of 256-767 tokens prefilled at setup) runs 32 decode steps. Each step: the
scheduler prepares the batch on the host (positions, a new page for each row crossing a page boundary,
block tables, staged in pinned memory), copies it to the GPU, replays the decode step's CUDA graph,
waits for the step's tokens (``.cpu()``), then processes them (append, detokenize, check a stop string).
The GPU idles while the host prepares and processes; the host idles while the GPU runs.
Optimized (optimized_async_scheduling.py): one step ahead: while the GPU runs step t, the host
processes step t-1's tokens and prepares step t+1's batch.
Expect (measured, H200, 2026-11-29): 65.26 -> 56.04 ms for 32 steps, 1.16x [1.15, 1.17] (estimated 1.2-1.6x;
2026-11-26: 58.29 -> 54.58 ms, 1.07x): a 1.64 ms GPU step; ~0.40 ms of host work a step on that host (~0.18 ms
on 2026-11-26) is what overlap hides. ``gpu_busy`` (GPU time in steps / wall, CUDA events): 0.86 -> 0.93. Profiled
(torch, 2026-11-29): a step is 1.57 ms of kernels: the per-layer page gather 50% (copies 37%), attention 18%.
Tolerance: tokens exactly (the same graphed step on the same inputs).
Run: python ch16/baseline_async_scheduling.py  |  aisp bench run -t ch16:async_scheduling
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from ch16_decode import GPU_SIZED, MODEL, PAGED_STEP_KERNELS, GraphedDecode, dtype_on, weight_bytes
from ch16_scheduler import Scheduler

import aisp
from aisp.kits import llm
from aisp.kits.llm import LLMConfig


@dataclass(frozen=True, kw_only=True)
class AsyncWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    slots: int = 64
    """Running requests (decode rows)."""
    shortest: int = 256
    """Prompt lengths: shortest + (37 s mod span) for slot s."""
    span: int = 512
    steps: int = 32
    page_size: int = 16

    def prompts(self) -> list[int]:
        return [self.shortest + (37 * s) % self.span for s in range(self.slots)]


def _workload() -> AsyncWorkload:
    w = AsyncWorkload()
    kv = sum(w.model.kv_bytes_per_token() * (p + t) for p in w.prompts() for t in range(w.steps))
    # Latency: the steps' nodes and 1 graph launch, the only serial one (the pipeline issues the rest as the GPU runs).
    return AsyncWorkload(bytes=w.steps * weight_bytes(w.model) + kv, items=w.slots * w.steps, item_unit="tokens",
                         latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=w.steps * PAGED_STEP_KERNELS),
                         precision="exact", requires=GPU_SIZED,
                         ceiling_note="profiled (torch profiler, H200): GPU busy 83%; a graphed step is 1.57 ms of kernels: the per-layer page gather 50% (copies 37%, gathers 13%), attention 18%",
                         window="idle")


WORKLOAD = _workload()


class SerialLoop(aisp.Benchmark):
    """Returns the generated tokens (slots, steps)."""

    workload: AsyncWorkload = WORKLOAD
    inputs = ("first",)
    state = ("pool_k", "pool_v", "table")
    scratch = ("stages", "host_tokens")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        lengths = w.prompts()
        width = llm.pages_for(max(lengths) + w.steps, w.page_size)
        total = 1 + sum(llm.pages_for(n + w.steps, w.page_size) for n in lengths)
        self.model = llm.build_decoder(w.model, self.seed, self.device, dtype_on(self.device), self.device.type == "cuda")
        layout = llm.PageLayout(pages=total, page_size=w.page_size, rows=w.slots, max_pages=width)
        cache = llm.PagedKVCache(w.model, layout, self.device, dtype_on(self.device))
        pool = llm.PagePool(total)
        pages = [pool.allocate(llm.pages_for(n, w.page_size)) for n in lengths]
        for s, row in enumerate(pages):
            cache.assign(s, row)
        prompts = [torch.randint(w.model.vocab, (n,), generator=gen, device=self.device) for n in lengths]
        self.first = llm.greedy(llm.prefill(self.model, cache, prompts))
        self.pool_k, self.pool_v, self.table = cache.k, cache.v, cache.table
        self.scheduler = Scheduler(pool, pages, lengths, cache.table.cpu(), w.page_size)
        self.step = GraphedDecode(self.model, cache, w.slots, width * w.page_size)
        pin = self.device.type == "cuda"
        self.stages = [(torch.zeros(w.slots, dtype=torch.long, pin_memory=pin),
                        torch.zeros(w.slots, width, dtype=torch.long, pin_memory=pin)) for _ in range(2)]
        """Pinned host staging (positions, block tables), two so one can fill while the other copies."""
        self.host_tokens = [torch.zeros(w.slots, dtype=torch.long, pin_memory=pin) for _ in range(2)]
        self.step_times: list[tuple] | None = None

    def prepare(self, i: int) -> None:
        self.scheduler.prepare(*self.stages[i])

    def upload(self, i: int) -> None:
        """Stage ``i`` to the graph's static inputs (pinned, contiguous: truly asynchronous copies)."""
        positions, table = self.stages[i]
        self.step.pos.copy_(positions, non_blocking=True)
        self.table.copy_(table, non_blocking=True)

    def timed_step(self) -> None:
        """One graph replay, bracketed by CUDA events when ``gpu_busy`` is being measured."""
        if self.step_times is not None and self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self.step()
            end.record()
            self.step_times.append((start, end))
        else:
            self.step()

    def begin(self) -> None:
        self.scheduler.reset()
        self.step.tok.copy_(self.first)

    def finish(self) -> torch.Tensor:
        return torch.tensor(self.scheduler.tokens, device=self.device)

    def run(self) -> torch.Tensor:
        self.begin()
        for _ in range(self.workload.steps):
            self.prepare(0)
            self.upload(0)
            self.timed_step()
            self.scheduler.process(self.step.next_tok.cpu())
        return self.finish()

    def metrics(self) -> dict[str, float]:
        if self.device.type != "cuda":
            return {}
        self.step_times = []
        torch.cuda.synchronize()
        start = time.perf_counter()
        self.run()
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3
        busy = sum(a.elapsed_time(b) for a, b in self.step_times)
        self.step_times = None
        return {"gpu_busy": busy / wall_ms, "gpu_step_ms": busy / self.workload.steps}


def get_benchmark() -> aisp.Benchmark:
    return SerialLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
