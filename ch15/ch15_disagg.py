"""What the two-rank serving pair (``disagg_prefill_decode_multigpu``) shares: its workload, a
request's K/V packed for sending, per-request TTFT/TPOT marks, and the exchange that gives every
rank the whole stream's output (so each rank's optimized output can be checked against its baseline's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from ch15_serving import StreamBenchmark, StreamWorkload

from aisp.kits.llm import DenseKVCache, Generated, Request
from aisp.kits.multirank import world_and_rank


@dataclass(frozen=True, kw_only=True)
class DisaggWorkload(StreamWorkload):
    group: int = 4
    """Most requests prefilled together by the disaggregated variant's prefill rank."""
    prefill_budget: int = 16384
    """Padded prompt tokens prefilled together (both variants): bounds prefill activation memory."""


def pack_kv(cache: DenseKVCache, row: int, length: int) -> torch.Tensor:
    """Row ``row``'s first ``length`` positions, every layer: (2, layers, kv_heads, length, dim), contiguous."""
    return torch.stack([cache.k[:, row, :, :length], cache.v[:, row, :, :length]])


def unpack_kv(cache: DenseKVCache, row: int, kv: torch.Tensor) -> None:
    """Writes a packed row (from :func:`pack_kv`) into row ``row`` of ``cache``."""
    length = kv.shape[3]
    cache.k[:, row, :, :length] = kv[0]
    cache.v[:, row, :, :length] = kv[1]


class Marks:
    """Times of token events on this rank (CUDA events, read after the run; host clock on a CPU),
    and per request the mark of its first token (or admission) and of its last token."""

    def __init__(self, device: torch.device) -> None:
        self.cuda, self.times = device.type == "cuda", []
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.count: dict[int, int] = {}
        self.mark([])

    def mark(self, rids: list[int]) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.times.append(event)
        else:
            self.times.append(time.perf_counter())
        for rid in rids:
            self.first.setdefault(rid, len(self.times) - 1)
            self.last[rid] = len(self.times) - 1
            self.count[rid] = self.count.get(rid, 0) + 1

    def ms(self, i: int) -> float:
        """Mark ``i`` in ms after the run's start."""
        if self.cuda:
            torch.cuda.synchronize()
            return self.times[0].elapsed_time(self.times[i])
        return (self.times[i] - self.times[0]) * 1e3


def latency_metrics(ttft: dict[int, float], tpot: dict[int, float]) -> dict[str, float]:
    """Every rank's per-request TTFT and TPOT (ms) merged; p50/p99 of each."""
    everyone = [(ttft, tpot)]
    if world_and_rank()[0] > 1:
        everyone = [None] * world_and_rank()[0]
        dist.all_gather_object(everyone, (ttft, tpot))
    merged = [{k: v for part in everyone for k, v in part[i].items()} for i in (0, 1)]
    out = {}
    for name, values in zip(("ttft", "tpot"), merged, strict=True):
        x = torch.tensor(list(values.values()), dtype=torch.float64)
        if x.numel():
            out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = float(x.median()), float(x.quantile(0.99))
    return out


def share(out: Generated, mine: list[int]) -> Generated:
    """Every rank gets the whole stream's output: row r of ``out`` is valid on the rank whose
    ``mine`` holds r (a row's -1/0 padding elsewhere); a max over ranks of (tokens + 1, top on its row)."""
    world = world_and_rank()[0]
    if world == 1:
        return out
    owned = torch.zeros(out.tokens.shape[0], dtype=torch.bool, device=out.tokens.device)
    owned[mine] = True
    tokens = torch.where(owned[:, None], out.tokens + 1, 0)
    top = torch.where(owned[:, None, None], out.top, 0.0)
    dist.all_reduce(tokens)
    dist.all_reduce(top)
    return Generated(tokens - 1, top)


class DisaggBase(StreamBenchmark):
    """The stream on every rank (same prompts, same weights: both are drawn from the run's seed)."""

    workload: DisaggWorkload

    def setup(self) -> None:
        super().setup()
        self.world, self.rank = world_and_rank()
        assert self.world == 2, f"a prefill rank and a decode rank: world of {self.world}"
        self.marks = Marks(self.device)

    def local(self, rids: list[int]) -> list[Request]:
        """The requests ``rids``, renumbered 0.. (the kit's loops index outputs by rid)."""
        return [Request(i, self.requests[r].prompt, self.requests[r].output_len, 0.0) for i, r in enumerate(rids)]

    def prefills(self) -> bool:
        """Whether this rank produces first tokens (its marks give TTFT)."""
        return True

    def metrics(self) -> dict[str, float]:
        """TTFT (from the run's start) and TPOT (mean gap after the first token, or after the KV
        arrived) of the last run, p50/p99 over the stream; each rank timed on its own clock."""
        m = self.marks
        ttft = {r: m.ms(i) for r, i in m.first.items()} if self.prefills() else {}
        tpot = {r: (m.ms(m.last[r]) - m.ms(m.first[r])) / (m.count[r] - 1) for r in m.first if m.count[r] > 1}
        return latency_metrics(ttft, tpot)


def prefill_groups(requests: list[Request], most: int, budget: int) -> list[list[Request]]:
    """Requests in order, at most ``most`` together and their padded prompt tokens within ``budget``."""
    groups: list[list[Request]] = [[]]
    for r in requests:
        cur = groups[-1]
        longest = max([len(r.prompt)] + [len(g.prompt) for g in cur])
        if cur and (len(cur) == most or longest * (len(cur) + 1) > budget):
            groups.append(cur := [])
        cur.append(r)
    return groups
