"""Megatron-style tensor parallelism for the serving kit's decoder, built from its seeded weights.

:class:`ShardedDecoder` holds one rank's part of a kit :class:`~aisp.kits.llm.Decoder` (``Shard(i, n)``):

- QKV: column-parallel. The rank keeps its query heads and the K/V heads they read (GQA groups stay
  whole: 64 query / 8 K/V heads -> 32 / 4 per rank), so attention runs locally on its heads;
- attention output: row-parallel (the input columns of the rank's heads): a partial sum, then one
  all-reduce; SwiGLU: gate and up column-parallel (the rank's ffn slice of each), down row-parallel,
  one all-reduce. Two all-reduces per block, of batch x dim activations each;
- norms, embedding and LM head: replicated. Every rank then computes the same logits and picks the
  same token with no further collective. A vocab-parallel head would read 1/n of the head's bytes per
  rank but needs a cross-rank top-k (a gather per step) for the token and the logits verification
  compares; with a 32k vocabulary the head is a small share of a wide decoder's bytes (README).

``Shard(0, 1)`` is the whole decoder with no collective: the one-GPU decode, on the same code path
(bit-identical to the kit's ``decode``; tests/test_ch16_tp.py checks it). The prompts are prefilled
by the kit's decoder; :func:`shard_cache` copies the rank's K/V heads of that cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from aisp.kits.llm import Decoder, DenseKVCache, LLMConfig
from aisp.kits.llm.cache import KVCache
from aisp.kits.llm.model import Block, apply_rope, rope_tables


@dataclass(frozen=True)
class Shard:
    index: int = 0
    """This rank's part, 0..count-1."""
    count: int = 1
    """Ranks the decoder is split over (1: the whole decoder, no collective)."""

    def part(self, n: int) -> slice:
        """This rank's contiguous 1/count of ``n`` rows (``n`` must divide evenly)."""
        if n % self.count:
            raise ValueError(f"{n} does not split over {self.count} ranks")
        size = n // self.count
        return slice(self.index * size, (self.index + 1) * size)


def local_heads(cfg: LLMConfig, shard: Shard) -> LLMConfig:
    """The attention a rank runs: its query and K/V heads, the head size unchanged (``dim`` here is
    the rank's query width, not the model's)."""
    return replace(cfg, dim=cfg.dim // shard.count, heads=cfg.heads // shard.count,
                   kv_heads=cfg.kv_heads // shard.count)


@dataclass(frozen=True)
class DecodeStep:
    """What every block of one forward shares: shape, RoPE tables, the bound cache and its mask."""

    shape: tuple[int, int]
    rope: tuple[torch.Tensor, torch.Tensor]
    cache: KVCache
    mask: torch.Tensor


Reduce = Callable[[torch.Tensor, int], torch.Tensor]
"""(partial, call site) -> the sum over ranks of every rank's partial; sites are 2 * layer (+ 1 for the MLP)."""


def nccl_reduce(partial: torch.Tensor, site: int) -> torch.Tensor:
    dist.all_reduce(partial)
    return partial


class ShardedBlock(nn.Module):
    def __init__(self, block: Block, cfg: LLMConfig, shard: Shard, layer: int = 0, reduce: Reduce = nccl_reduce) -> None:
        super().__init__()
        self.local, self.shard, self.layer, self.all_reduce = local_heads(cfg, shard), shard, layer, reduce
        q, kv = cfg.dim, cfg.kv_heads * cfg.head_dim
        wq, wk, wv = block.attn.qkv.weight.split([q, kv, kv])
        gate, up = block.gate_up.weight.chunk(2)
        heads, kv_heads, ffn = shard.part(q), shard.part(kv), shard.part(cfg.ffn)
        self.norm1, self.norm2 = block.norm1, block.norm2
        self.register_buffer("qkv", torch.cat([wq[heads], wk[kv_heads], wv[kv_heads]]))
        self.register_buffer("out", block.attn.out.weight[:, heads].contiguous())
        self.register_buffer("gate_up", torch.cat([gate[ffn], up[ffn]]))
        self.register_buffer("down", block.down.weight[:, ffn].contiguous())

    def reduce(self, partial: torch.Tensor, mlp: int) -> torch.Tensor:
        """The sum over ranks of every rank's partial output."""
        return self.all_reduce(partial, 2 * self.layer + mlp) if self.shard.count > 1 else partial

    def forward(self, x: torch.Tensor, step: DecodeStep, layer: int) -> torch.Tensor:
        x = x + self.reduce(F.linear(self.attend(F.linear(self.norm1(x), self.qkv), step, layer), self.out), 0)
        gate, up = F.linear(self.norm2(x), self.gate_up).chunk(2, dim=-1)
        return x + self.reduce(F.linear(F.silu(gate) * up, self.down), 1)

    def attend(self, qkv: torch.Tensor, step: DecodeStep, layer: int) -> torch.Tensor:
        """The kit's cached attention on this rank's heads: (tokens, local qkv) -> (tokens, local dim)."""
        cfg, (b, t) = self.local, step.shape
        kv, groups, hd = cfg.kv_heads, cfg.heads // cfg.kv_heads, cfg.head_dim
        q, k, v = qkv.view(b, t, -1).split([cfg.dim, kv * hd, kv * hd], -1)
        qk = apply_rope(torch.cat([q, k], -1).view(b, t, cfg.heads + kv, hd), *step.rope)
        q, k, v = qk[:, :, :cfg.heads], qk[:, :, cfg.heads:], v.view(b, t, kv, hd)
        step.cache.write(layer, k, v)
        keys, values = step.cache.read(layer)
        q = q.reshape(b, t, kv, groups, hd).permute(0, 2, 3, 1, 4).reshape(b, kv, groups * t, hd)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=step.mask)
        return y.view(b, kv, groups, t, hd).permute(0, 3, 1, 2, 4).reshape(b * t, cfg.dim)


class ShardedDecoder(nn.Module):
    """One rank's part of ``model``; ``forward`` decodes over a bound cache (a ``DenseKVCache.bind``
    step of :func:`shard_cache`'s cache) and returns the full logits (batch, tokens, vocab) on every rank;
    ``reduce`` sums the blocks' partial outputs over ranks (NCCL by default)."""

    def __init__(self, model: Decoder, shard: Shard, reduce: Reduce = nccl_reduce) -> None:
        super().__init__()
        self.cfg = model.cfg
        self.embed, self.norm, self.head = model.embed, model.norm, model.head
        self.blocks = nn.ModuleList(ShardedBlock(b, model.cfg, shard, i, reduce) for i, b in enumerate(model.blocks))

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        groups = self.cfg.heads // self.cfg.kv_heads
        step = DecodeStep(tuple(tokens.shape), rope_tables(self.cfg, positions), cache,
                          cache.mask(positions).repeat(1, 1, groups, 1))
        x = self.embed(tokens.reshape(-1))
        for i, block in enumerate(self.blocks):
            x = block(x, step, i)
        return self.head(self.norm(x)).view(*tokens.shape, -1)


def shard_cache(cache: DenseKVCache, cfg: LLMConfig, shard: Shard) -> DenseKVCache:
    """A cache of the rank's K/V heads holding ``cache``'s keys and values for them."""
    k = cache.k
    local = DenseKVCache(local_heads(cfg, shard), k.shape[1], k.shape[3], k.device, k.dtype)
    heads = shard.part(cfg.kv_heads)
    local.k.copy_(cache.k[:, :, heads])
    local.v.copy_(cache.v[:, :, heads])
    return local
