"""Expert parallelism: the token dispatch and combine of one mixture-of-experts layer.

Every rank holds ``tokens_per_rank`` tokens and ``experts / world`` of the experts. A router
sends each token to one expert (top-1, with its softmax probability as the gate); the token
travels to the rank that holds that expert (dispatch), the expert transforms it, and the result
travels back and is scaled by the gate (combine). The experts here are per-expert scale vectors
(a diagonal layer), the same in both variants, so the time is the routing and the two all-to-all
exchanges that the pair changes; a real MoE adds its expert GEMMs on top.

Two ways to exchange tokens:

- ``ListDispatch``: per call, count the tokens per destination, exchange the counts and copy
  them to the host (``.tolist()``: the CPU waits for the GPU), split the tokens into a list of
  per-peer tensors, allocate a fresh list of receive tensors, ``all_to_all`` the lists (tokens,
  then expert ids, then results back) and ``torch.cat`` each received list.
- ``PreallocatedDispatch``: buffers allocated once in ``setup()`` with room for every token to
  go to any one rank (``world x tokens_per_rank`` rows; nothing is ever dropped). Each token's
  slot is computed on the GPU, and three fixed-size ``all_to_all_single`` calls move whole
  buffers: no host sync, no per-peer lists, no concatenation, receive buffers reused. Empty
  slots carry expert id -1 and are ignored on return. The price: every rank sends ``world``
  times the rows it must (padding), which low-latency decode kernels (e.g. DeepEP's) accept for
  the same reasons.

Without a process group the code runs as a world of one rank (every expert local).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

import aisp
from aisp.kits.multirank import world_and_rank

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True, kw_only=True)
class ExpertParallelWorkload(aisp.Workload):
    tokens_per_rank: int = 512
    """Tokens each rank routes per call (a decode step's batch)."""
    hidden: int = 4096
    experts: int = 8
    world: int = 2
    """Ranks the experts are spread across (experts / world each)."""
    dtype: str = "bf16"


def ep_workload(requires: aisp.Requirements | None = None, **kw: object) -> ExpertParallelWorkload:
    """A workload with its accounting: items are the tokens routed across all ranks per call."""
    w = ExpertParallelWorkload(**kw)
    # Ceiling: NVLink bytes. Each token routed to an expert on another rank crosses there and back
    # (hidden x its element size each way); the local ones stay. With top-1 of experts spread evenly
    # and a router of iid columns, (world - 1) / world of the tokens are remote, on average: a call's
    # own share differs by a few % (at 2 ranks, sd ~11 of 256 tokens a rank). Summed over the ranks and
    # counted once by the sender: 2 x 2 x 256 x 8 KiB = 8 MiB at 2 x 392.4 GB/s, ~11 us. The padded
    # exchange of the optimized (all of a rank's rows go to every rank) is the design's, not counted.
    # Latency: the least any design needs is 2 all-to-alls a call (the tokens out with their expert
    # ids packed beside them, the results back); the pair's variants make 3 (the ids apart). Priced at
    # aisp peak's alltoall_latency; until a 2-GPU host has measured it the ceiling leaves them out.
    remote = w.world * w.tokens_per_rank * (w.world - 1) / w.world
    nbytes = 2.0 * remote * w.hidden * DTYPES[w.dtype].itemsize
    return ExpertParallelWorkload(
        **kw, items=w.tokens_per_rank * w.world, item_unit="tokens", precision=w.dtype, timeout_s=240,
        bytes=nbytes, link="nvlink", requires=requires or aisp.Requirements(cuda=True, ranks=w.world),
        latency=aisp.LatencyCounts(all_to_alls=2),
        ceiling_note="profiled (torch profiler, 2xH200): 36 kernels a call, 0.19 ms of kernels on rank 1 "
                     "(3 all-to-alls 0.07) in a 0.84 ms call: host issue bounds it")


def route(x: torch.Tensor, router: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(expert id, gate) of each token: top-1 of the router's softmax, the gate in x's dtype."""
    probs = torch.softmax((x @ router).float(), dim=-1)
    gate, expert = probs.max(dim=-1)
    return expert, gate.to(x.dtype)


def apply_experts(rows: torch.Tensor, ids: torch.Tensor, scales: torch.Tensor, first: int,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Each row times its expert's scale vector; ``scales`` holds this rank's experts from ``first``.
    Ids outside this rank's experts (empty slots) are clamped: their rows are never read back."""
    local = (ids - first).clamp(0, scales.shape[0] - 1)
    return torch.mul(rows, scales[local], out=out)


class ExpertParallelBench(aisp.Benchmark):
    """Inputs shared by both variants: this rank's tokens, the router and this rank's experts."""

    workload: ExpertParallelWorkload
    inputs = ("x",)

    def setup(self) -> None:
        w = self.workload
        self.world, rank = world_and_rank()
        dtype = DTYPES[w.dtype]
        shared = torch.Generator(device=self.device)
        shared.manual_seed(self.seed)
        self.router = torch.randn(w.hidden, w.experts, generator=shared, device=self.device, dtype=dtype)
        all_scales = torch.rand(w.experts, w.hidden, generator=shared, device=self.device, dtype=dtype) + 0.5
        self.per_rank = w.experts // self.world
        self.first = rank * self.per_rank
        self.scales = all_scales[self.first:self.first + self.per_rank].clone()
        own = torch.Generator(device=self.device)
        own.manual_seed(self.seed * 1009 + rank)
        self.x = torch.randn(w.tokens_per_rank, w.hidden, generator=own, device=self.device, dtype=dtype)
        self.prepare()

    def prepare(self) -> None:
        """Untimed hook after the inputs exist (buffers)."""

    def destinations(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(expert, gate, destination rank, order that groups tokens by destination)."""
        expert, gate = route(self.x, self.router)
        dest = torch.div(expert, self.per_rank, rounding_mode="floor")
        return expert, gate, dest, torch.argsort(dest, stable=True)


def all_to_all_single(out: torch.Tensor, inp: torch.Tensor) -> None:
    """``dist.all_to_all_single`` of equal blocks; a copy in a world of one rank."""
    if world_and_rank()[0] == 1:
        out.copy_(inp)
    else:
        dist.all_to_all_single(out, inp)


def exchange_lists(rows: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
    """Send ``send[p]`` consecutive rows to rank p, receive ``recv[p]`` from it, through fresh lists.

    NCCL's ``all_to_all`` takes lists of unequal sizes; gloo's does not, so elsewhere the same
    per-peer exchange runs as point-to-point operations (a copy to itself, in a world of one).
    """
    outputs = [rows.new_empty((n, *rows.shape[1:])) for n in recv]
    inputs = list(rows.split(send))
    world, rank = world_and_rank()
    if world > 1 and dist.get_backend() == "nccl":
        dist.all_to_all(outputs, inputs)
        return torch.cat(outputs)
    outputs[rank].copy_(inputs[rank])
    ops = [dist.P2POp(op, t, p) for p in range(world) if p != rank
           for op, t in ((dist.isend, inputs[p]), (dist.irecv, outputs[p]))]
    for work in dist.batch_isend_irecv(ops) if ops else []:
        work.wait()
    return torch.cat(outputs)


class ListDispatch(ExpertParallelBench):
    def run(self) -> torch.Tensor:
        expert, gate, dest, order = self.destinations()
        send_counts = torch.bincount(dest, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        all_to_all_single(recv_counts, send_counts)
        send, recv = send_counts.tolist(), recv_counts.tolist()
        tokens = exchange_lists(self.x[order], send, recv)
        ids = exchange_lists(expert[order], send, recv)
        back = exchange_lists(apply_experts(tokens, ids, self.scales, self.first), recv, send)
        out = torch.empty_like(self.x)
        out[order] = back * gate[order].unsqueeze(-1)
        return out


class PreallocatedDispatch(ExpertParallelBench):
    scratch = ("send_x", "recv_x", "send_ids", "recv_ids", "expert_out", "back")

    def prepare(self) -> None:
        w = self.workload
        rows = self.world * w.tokens_per_rank
        self.send_x = torch.empty(rows, w.hidden, device=self.device, dtype=self.x.dtype)
        self.recv_x, self.expert_out, self.back = (torch.empty_like(self.send_x) for _ in range(3))
        self.send_ids = torch.empty(rows, device=self.device, dtype=torch.long)
        self.recv_ids = torch.empty_like(self.send_ids)
        self.ranks = torch.arange(self.world, device=self.device)
        self.positions = torch.arange(w.tokens_per_rank, device=self.device)

    def slots(self, dest: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        """Row of each token (in ``order``) in the send buffer: its destination's block of
        ``tokens_per_rank`` rows, then its rank among the tokens going there. No host sync (and
        no atomics: the counts are a compare-and-sum, deterministic)."""
        counts = (dest.unsqueeze(1) == self.ranks).sum(0)
        starts = counts.cumsum(0) - counts
        sorted_dest = dest[order]
        return sorted_dest * self.workload.tokens_per_rank + self.positions - starts[sorted_dest]

    def run(self) -> torch.Tensor:
        expert, gate, dest, order = self.destinations()
        slot = self.slots(dest, order)
        self.send_ids.fill_(-1)
        self.send_ids[slot] = expert[order]
        self.send_x[slot] = self.x[order]
        all_to_all_single(self.recv_x, self.send_x)
        all_to_all_single(self.recv_ids, self.send_ids)
        apply_experts(self.recv_x, self.recv_ids, self.scales, self.first, out=self.expert_out)
        all_to_all_single(self.back, self.expert_out)
        out = torch.empty_like(self.x)
        out[order] = self.back[slot] * gate[order].unsqueeze(-1)
        return out
