"""Baseline vectorized router: a serving router scores the workers for each request, one request at a time.

Baseline: 512 requests waiting in one scheduling tick are routed over 64 workers against the same
snapshot of worker state, as a per-request handler does it: for each request, score every worker
(queued tokens plus the prompt tokens a prefix-cache miss would add, divided by the worker's
prefill speed; a worker whose free KV cache cannot hold prompt + output is pushed to the bottom) and
keep the best two (a choice and a fallback). That is ~9 small tensor ops per request: 4,600 kernel
launches on a GPU (~6 us each), ~4,600 dispatcher calls on a CPU.
Optimized (optimized_vectorized_router.py): the same arithmetic as (512, 64) tensors and one
``topk``: 12 ops in all, whatever the number of requests.
Ceiling: launch/dispatch overhead (the work is 0.2 MFLOP and 0.3 MB): 11 ops dispatched from Python (its
12 less a repeated negation) at the 5.76 us dispatch floor, 63 us (issue 30).
Expect (measured, H200, 2026-11-26): 76.9 -> 0.2959 ms, 302.7x [246, 372] (estimated 400-600x, ~25-35
-> ~0.06 ms). The ratio is against a per-request Python loop (~4,600 ops, ~17 us of host dispatch
each), so it measures the loop, not a kernel. The optimized call's share of a ceiling is meaningless
(0.2 MFLOP, 1.4 GB/s): it is launch-bound, its 12 ops at ~25 us each (cv 0.28; profiled 2026-11-29:
13 kernels, 29 us of them, GPU busy 7% of a 0.41 ms window under the torch profiler). CPU
(estimated, not yet measured): ~10-20 ms -> ~0.1 ms.
Tolerance: exact (the same fp32 operations element by element; worker ids compared exactly).
Run: python ch17/baseline_vectorized_router.py  |  aisp bench run -t ch17:vectorized_router
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp

PENALTY = 1e6
"""Seconds added to a worker whose free KV cache cannot hold the request (finite, so no ties)."""


@dataclass(frozen=True, kw_only=True)
class RouterWorkload(aisp.Workload):
    requests: int = 512
    """Requests routed in one call (one scheduling tick)."""
    workers: int = 64
    """Serving workers (replicas) to choose from."""
    prefixes: int = 32
    """Distinct shared prompt prefixes (system prompts) a worker may hold in its prefix cache."""
    choices: int = 2
    """Workers kept per request, best first."""


def router_workload(**kw: int) -> RouterWorkload:
    w = RouterWorkload(**kw)
    cells = w.requests * w.workers
    # Latency: the vectorized call's ops, each dispatched from Python (and launched, on a GPU): gather,
    # 1 - hit, x prompt, + queue, / speed, prompt + output, >=, negate, - penalty, where, topk; the
    # optimized dispatches 12 (it negates wait twice). Priced at the dispatch floor, a CPU's too.
    return RouterWorkload(**kw, flops=8.0 * cells, bytes=4.0 * (3 * cells + w.requests * (3 + 2 * w.choices)),
                          latency=aisp.LatencyCounts(dispatches=11),
                          items=w.requests, item_unit="requests", precision="fp32",
                          ceiling_note="profiled (torch profiler, H200): GPU busy 7% of a 0.41 ms window under the profiler: "
                                       "13 kernels, 29 us of kernels, all under 10 us; host gaps 339 us a call",
                          window="idle")


WORKLOAD = router_workload()


class PerRequestRouter(aisp.Benchmark):
    """Inputs: requests (prompt and output tokens, prefix id) and the workers' state snapshot (queued
    tokens, free KV tokens, which prefixes each caches). Returns (scores, worker ids), (requests, choices)."""

    workload = WORKLOAD
    inputs = ("prompt", "output", "prefix", "queue", "kv_free", "cached")

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        r, k = w.requests, w.workers
        self.prompt = torch.randint(64, 4096, (r,), generator=gen, device=dev).float()
        self.output = torch.randint(16, 1024, (r,), generator=gen, device=dev).float()
        self.prefix = torch.randint(w.prefixes, (r,), generator=gen, device=dev)
        self.queue = torch.rand(k, generator=gen, device=dev) * 32768
        self.kv_free = torch.rand(k, generator=gen, device=dev) * 65536
        self.cached = (torch.rand(k, w.prefixes, generator=gen, device=dev) < 0.25).float()
        self.speed = 8000 + torch.rand(k, generator=gen, device=dev) * 24000  # prefill tokens/s per worker

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        scores = torch.empty(w.requests, w.choices, device=self.device)
        ids = torch.empty(w.requests, w.choices, dtype=torch.long, device=self.device)
        for i in range(w.requests):
            hit = self.cached[:, self.prefix[i]]
            wait = (self.queue + self.prompt[i] * (1 - hit)) / self.speed
            fits = self.kv_free >= self.prompt[i] + self.output[i]
            score = torch.where(fits, -wait, -wait - PENALTY)
            scores[i], ids[i] = score.topk(w.choices)
        return scores, ids


def get_benchmark() -> aisp.Benchmark:
    return PerRequestRouter()


if __name__ == "__main__":
    aisp.main(get_benchmark)
