"""Expert parallelism over ranks for ``topology_aware_moe_multigpu``: each rank holds E / world experts
and its own tokens; a call routes the tokens, sends each (token, expert) assignment to the expert's
rank (``all_to_all_single``; counts first, so the sizes are known), runs the local experts
(aisp.kits.moe.expert_ffn over the received rows sorted by expert), sends the outputs back the same way
and combines them with the gates. Both variants run this code; only ``owner`` differs: which rank
holds which expert.

Tokens have affinity: rank r's tokens lean towards the expert group r (a shift of the activations
along the direction the group's router columns share: ~87% of a rank's assignments go to its group).
That is the structure a locality planner exploits (requests of one tenant or language on one rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

import aisp
from aisp.kits.moe import dtype_on, expert_ffn, expert_weights, route, sort_by_expert
from aisp.kits.multirank import world_and_rank

TWO_RANKS = aisp.Requirements(cuda=True, ranks=2)
"""One rank per GPU; tests/test_ch17_multirank.py runs the logic on two gloo ranks at small sizes."""


@dataclass(frozen=True, kw_only=True)
class EPWorkload(aisp.Workload):
    tokens: int = 16384
    """Tokens per rank."""
    dim: int = 4096
    ffn: int = 1024
    """Each expert's SwiGLU width."""
    experts: int = 16
    top_k: int = 2
    affinity: float = 2.0
    """Shift of a rank's tokens towards its expert group (in units of the router's noise)."""


def ep_workload(requires: aisp.Requirements = TWO_RANKS, **kw: object) -> EPWorkload:
    """Accounting summed over the ranks: router and expert FLOPs of every rank's tokens (tensor-core
    bound), held to world x one GPU's peak."""
    w = EPWorkload(**kw)
    tokens = w.tokens * requires.world_size
    flops = 2.0 * tokens * w.dim * w.experts + 6.0 * tokens * w.top_k * w.dim * w.ffn
    precision = "bf16" if requires.cuda else "fp32"
    return EPWorkload(**kw, flops=flops, items=tokens, item_unit="tokens", precision=precision, requires=requires)


def uniform_owner(experts: int, world: int) -> list[int]:
    """Round-robin placement: expert e on rank e mod world, blind to where its tokens come from."""
    return [e % world for e in range(experts)]


def planned_owner(counts: torch.Tensor) -> list[int]:
    """Locality-aware placement from routing counts (world, experts): (rank, expert) pairs by count,
    largest first; an expert goes to the first rank that wants it and has room (E / world each)."""
    world, experts = counts.shape
    owner, room = [-1] * experts, [experts // world] * world
    for flat in counts.flatten().argsort(descending=True, stable=True).tolist():
        rank, e = divmod(flat, experts)
        if owner[e] < 0 and room[rank] > 0:
            owner[e], room[rank] = rank, room[rank] - 1
    return owner


class ExpertParallel(aisp.Benchmark):
    """Input ``x`` (tokens, dim): this rank's tokens. Returns their MoE output (tokens, dim)."""

    workload: EPWorkload
    inputs = ("x",)

    def setup(self) -> None:
        w, (self.world, self.rank) = self.workload, world_and_rank()
        assert self.world >= 2 and w.experts % self.world == 0, f"a world of {self.world} ranks"
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        dev, dtype = self.device, dtype_on(self.device)
        shared = torch.Generator(device=dev).manual_seed(self.seed * 7919)
        own = torch.Generator(device=dev).manual_seed(self.seed * 1009 + self.rank + 1)
        centre = F.normalize(torch.randn(self.world, w.dim, generator=shared, device=dev), dim=1)
        group = torch.arange(w.experts, device=dev) * self.world // w.experts
        router = torch.randn(w.dim, w.experts, generator=shared, device=dev) / w.dim ** 0.5 + centre[group].T
        self.w_router = router.to(dtype)
        gate_up, down = expert_weights(w.experts, w.dim, w.ffn, shared, dev, dtype)
        self.x = (torch.randn(w.tokens, w.dim, generator=own, device=dev) + w.affinity * centre[self.rank]).to(dtype)
        owner = self.placement()
        mine = [e for e in range(w.experts) if owner[e] == self.rank]
        self.owner = torch.tensor(owner, device=dev)
        slot = [sum(1 for f in range(e) if owner[f] == owner[e]) for e in range(w.experts)]
        self.slot = torch.tensor(slot, device=dev)  # expert e's index among its owner's experts
        self.w_gate_up, self.w_down = gate_up[mine].contiguous(), down[mine].contiguous()
        self.remote_share = 0.0

    def placement(self) -> list[int]:
        """Which rank holds each expert."""
        raise NotImplementedError

    def exchange(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> torch.Tensor:
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        return out

    def run(self) -> torch.Tensor:
        w = self.workload
        ids, gates = route(self.x, self.w_router, w.top_k)
        flat = ids.reshape(-1)
        dest = self.owner[flat]
        order = (dest * w.experts + flat).argsort(stable=True)  # by destination rank, then expert
        sent = torch.bincount(dest, minlength=self.world)
        got = self.exchange(torch.empty_like(sent), sent, [1] * self.world, [1] * self.world)
        sc, rc = sent.tolist(), got.tolist()  # host sync: the message sizes
        token = order // w.top_k
        rows = self.exchange(self.x.new_empty(sum(rc), w.dim), self.x[token], rc, sc)
        slots = self.exchange(flat.new_empty(sum(rc)), self.slot[flat[order]], rc, sc)
        local, counts = sort_by_expert(slots, len(self.w_gate_up))
        y = torch.empty_like(rows)
        y[local] = expert_ffn(rows[local], slots[local], counts, self.w_gate_up, self.w_down)
        back = self.exchange(self.x.new_empty(len(order), w.dim), y, sc, rc)
        out = torch.zeros(self.x.shape, device=self.device)
        out.index_add_(0, token, back.float() * gates.reshape(-1)[order, None])
        self.remote_share = 1.0 - sc[self.rank] / max(sum(sc), 1)
        return out.to(self.x.dtype)

    def metrics(self) -> dict[str, float]:
        """Share of this rank's assignments sent to another rank in the last call, and the bytes that
        crossed the link for them (tokens there, outputs back)."""
        w = self.workload
        crossed = self.remote_share * w.tokens * w.top_k * w.dim * self.x.element_size() * 2
        return {"remote_share": self.remote_share, "link_mb_per_rank": crossed / 1e6}
