"""Context parallelism: attention over a sequence sharded across ranks.

Each rank holds ``seq_per_rank`` consecutive tokens of Q, K and V ([batch, heads, seq, dim]) and
computes the attention output of its own queries over the whole sequence (full, unmasked
attention, as in an encoder or a long-context cross-attention; causal attention over
contiguous shards would leave rank 0 idle and needs a load-balanced sharding, which this
example leaves out).

Two ways to see every K/V block:

- ``allgather_attention``: gather all K and V to every rank, concatenate, one attention call.
  Every rank holds the whole sequence's K/V (``world`` x its own), and the gather is exposed:
  nothing computes while it runs.
- ``ring_attention``: K/V blocks travel around a ring of ranks (send to rank+1, receive from
  rank-1). While block i is in flight the rank computes attention over the block it already
  has, returning the output and the log-sum-exp (LSE) of each query's scores; the partial
  results merge exactly with an online softmax. A rank holds at most three blocks (its own, the
  one it computes on, the one arriving), whatever the world size.

Merging two partial results over disjoint key sets A and B (per query row):
``lse = logaddexp(lse_A, lse_B)`` and ``out = out_A + sigmoid(lse_B - lse_A) * (out_B - out_A)``,
since ``sigmoid(lse_B - lse_A) = exp(lse_B) / (exp(lse_A) + exp(lse_B))`` is B's share of the
softmax mass.

Without a process group the code runs as a world of one rank (plain attention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

import aisp
from aisp.kits.multirank import high_priority_group, world_and_rank

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True, kw_only=True)
class ContextParallelWorkload(aisp.Workload):
    batch: int = 1
    heads: int = 32
    seq_per_rank: int = 4096
    """Tokens of the sequence each rank holds; the sequence is ``world`` times longer."""
    head_dim: int = 128
    world: int = 2
    """Ranks the sequence is sharded across."""
    dtype: str = "bf16"


def cp_workload(requires: aisp.Requirements | None = None, **kw: object) -> ContextParallelWorkload:
    """A workload with its accounting filled in. FLOPs are summed over the ranks (QK^T and PV of every
    rank's queries over the whole sequence: world x 4 B H S_rank S D = 4 B H S^2 D), items are the
    sequence's tokens."""
    w = ContextParallelWorkload(**kw)
    seq = w.seq_per_rank * w.world
    flops = 4.0 * w.batch * w.heads * seq * seq * w.head_dim
    return ContextParallelWorkload(
        **kw, flops=flops, items=w.batch * seq, item_unit="tokens", precision=w.dtype,
        requires=requires or aisp.Requirements(cuda=True, ranks=w.world), timeout_s=240)


def make_shard(bench: aisp.Benchmark) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's Q, K, V: different on every rank, drawn from the bench's seed and the rank."""
    w = bench.workload
    gen = torch.Generator(device=bench.device)
    gen.manual_seed(bench.seed * 1009 + world_and_rank()[1])
    shape = (w.batch, w.heads, w.seq_per_rank, w.head_dim)
    return tuple(torch.randn(shape, generator=gen, device=bench.device, dtype=DTYPES[w.dtype])
                 for _ in range(3))


def allgather_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Gather the whole sequence's K and V (fresh lists every call), concatenate, attend once."""
    return F.scaled_dot_product_attention(q, torch.cat(_gathered(k), dim=2), torch.cat(_gathered(v), dim=2))


def _gathered(t: torch.Tensor) -> list[torch.Tensor]:
    world = world_and_rank()[0]
    if world == 1:
        return [t]
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    return parts


def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, LSE) of softmax(q k^T / sqrt(d)) v over one K/V block, LSE fp32 [batch, heads, seq].

    On CUDA it runs the kernel ``F.scaled_dot_product_attention`` would pick for these inputs
    (cuDNN's on Hopper, else FlashAttention), so the ring and the all-gather baseline time the
    same attention kernel; on a CPU, PyTorch's flash CPU kernel.
    """
    if not q.is_cuda:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)
    elif torch._fused_sdp_choice(q, k, v) == SDPBackend.CUDNN_ATTENTION.value:
        out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True)[:2]
    elif torch._fused_sdp_choice(q, k, v) == SDPBackend.FLASH_ATTENTION.value:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False)[:2]
    else:
        raise RuntimeError("ring attention needs the cuDNN or FlashAttention kernel (they return the LSE); "
                           "SDPA would use neither for these inputs")
    return out, lse.reshape(q.shape[:3])


def merge(out: torch.Tensor | None, lse: torch.Tensor | None, block_out: torch.Tensor,
          block_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold one block's partial result into the running one (online softmax, see the module doc)."""
    if out is None or lse is None:
        return block_out, block_lse
    share = torch.sigmoid(block_lse - lse).unsqueeze(-1).to(out.dtype)
    return torch.lerp(out, block_out, share), torch.logaddexp(lse, block_lse)


Merge = Callable[[torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor],
                 tuple[torch.Tensor, torch.Tensor]]


def ring_buffers(k: torch.Tensor, v: torch.Tensor) -> list[torch.Tensor]:
    """Receive buffers for the ring, flat [K, V, K, V]: one K/V pair with two ranks, two beyond
    (double buffering: one is computed on while the other fills)."""
    pairs = min(2, world_and_rank()[0] - 1)
    return [torch.empty_like(t) for _ in range(pairs) for t in (k, v)]


def priority_group() -> dist.ProcessGroup | None:
    """``aisp.kits.multirank.high_priority_group()`` (made in setup, destroyed in teardown); None
    without a process group.

    Why: profiled on 2 x H200, the ring's send/recv ran after the first attention block instead of
    beside it; the likely reason, the attention's blocks fill the SMs and a kernel of equal priority
    waits until the last of them are dispatched. Pending blocks of a high-priority stream are
    dispatched first whenever an SM slot frees (ch11's ``stream_priority``)."""
    return None if world_and_rank()[0] == 1 else high_priority_group()


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, buffers: list[torch.Tensor],
                   group: dist.ProcessGroup | None = None, merge_block: Merge = merge) -> torch.Tensor:
    """Attention over the whole sequence with K/V blocks streamed around the ring.

    Step i computes on the block that started on rank - i while the next block arrives; the
    send/receive of step i is posted before its compute so the two overlap (NCCL runs them on
    its own stream; ``wait()`` only orders the next compute after the arrival). ``group``: the
    communicator the blocks travel on (the default group's ranks; None: the default group);
    ``merge_block``: how a block's result folds into the running one (:func:`merge`'s contract).
    """
    world, rank = world_and_rank()
    peer_to, peer_from = (rank + 1) % world, (rank - 1) % world
    cur_k, cur_v = k, v
    out = lse = None
    for step in range(world):
        pending = []
        if step < world - 1:
            slot = 2 * (step % (len(buffers) // 2))
            nxt_k, nxt_v = buffers[slot], buffers[slot + 1]
            pending = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, cur_k, peer_to, group), dist.P2POp(dist.isend, cur_v, peer_to, group),
                dist.P2POp(dist.irecv, nxt_k, peer_from, group), dist.P2POp(dist.irecv, nxt_v, peer_from, group)])
        out, lse = merge_block(out, lse, *block_attention(q, cur_k, cur_v))
        for work in pending:
            work.wait()
        if pending:
            cur_k, cur_v = nxt_k, nxt_v
    return out
