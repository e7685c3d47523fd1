"""A small Llama-shaped decoder for the serving chapters: RMSNorm, RoPE, grouped-query attention
(GQA), a SwiGLU MLP, untied LM head; bf16 on a GPU, fp32 on a CPU.

``Decoder.forward(tokens, positions, cache)`` runs any number of new tokens per sequence: a whole
prompt without a cache (causal attention over the input), or new tokens whose keys and values are
written into a KV cache (:mod:`aisp.kits.llm.cache`) at their positions and attend to every cached
position at or before their own. Weights come from a seed (:func:`build_decoder`); the LM head is
tied to a permutation of the embedding ("next token = perm(current)"), and the blocks add a
context-dependent term about 1.5x the embedding's size: the top-1 logit leads by ~8 (bf16 rounding
moves logits by ~0.05 at the default size), so two correct decoders that round differently
(another batch, a cache) pick the same greedy tokens, while the other top logits depend on the
whole context (a wrong cache changes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from aisp.kits.llm.cache import KVCache
from aisp.kits.llm.config import LLMConfig


def rope_tables(cfg: LLMConfig, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (batch, tokens, 1, head_dim / 2) for integer ``positions`` (batch, tokens)."""
    half = cfg.head_dim // 2
    inv = cfg.rope_base ** (-torch.arange(half, device=positions.device, dtype=torch.float32) / half)
    angles = positions.float()[..., None] * inv
    return angles.cos()[:, :, None], angles.sin()[:, :, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (first half, second half) of ``x`` (batch, tokens, heads, head_dim), in fp32."""
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


@dataclass(frozen=True)
class Segment:
    """Rows of one shape in a forward: ``tokens`` (batch, tokens) at ``positions``, with their cache
    step (None: no cache). A forward may mix segments, e.g. decode rows (batch, 1) and a prefill
    chunk (1, chunk): the matmuls run on all their tokens at once, attention per segment."""

    tokens: torch.Tensor
    positions: torch.Tensor
    cache: KVCache | None = None


@dataclass(frozen=True)
class _Bound:
    """A segment as attention sees it: its shape, RoPE tables and mask (None: causal, own keys)."""

    shape: tuple[int, int]
    rope: tuple[torch.Tensor, torch.Tensor]
    cache: KVCache | None
    mask: torch.Tensor | None


class Attention(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        kv = cfg.kv_heads * cfg.head_dim
        self.qkv = nn.Linear(cfg.dim, cfg.dim + 2 * kv, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, segments: list[_Bound], layer: int) -> torch.Tensor:
        """``x`` (all segments' tokens, dim) -> attention output, same shape."""
        qkv, outs, start = self.qkv(x), [], 0
        for seg in segments:
            n = seg.shape[0] * seg.shape[1]
            outs.append(self._attend(qkv[start:start + n].view(*seg.shape, -1), seg, layer))
            start += n
        return self.out(outs[0] if len(outs) == 1 else torch.cat(outs))

    def _attend(self, qkv: torch.Tensor, seg: _Bound, layer: int) -> torch.Tensor:
        """Causal self-attention over the new tokens when ``seg.mask`` is None, else over the cache."""
        cfg, (b, t, _) = self.cfg, qkv.shape
        kv, groups = cfg.kv_heads, cfg.heads // cfg.kv_heads
        q, k, v = qkv.split([cfg.dim, kv * cfg.head_dim, kv * cfg.head_dim], -1)
        qk = apply_rope(torch.cat([q, k], -1).view(b, t, cfg.heads + kv, cfg.head_dim), *seg.rope)
        q, k, v = qk[:, :, :cfg.heads], qk[:, :, cfg.heads:], v.view(b, t, kv, cfg.head_dim)
        if seg.cache is not None:
            seg.cache.write(layer, k, v)
        if seg.mask is None:  # K/V heads repeated for the query heads they serve (a prefill-sized copy)
            keys, values = (z.transpose(1, 2).repeat_interleave(groups, 1) for z in (k, v))
            y = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, is_causal=True).transpose(1, 2)
        else:  # each K/V head's query heads folded into its rows: no copy of the cache
            assert seg.cache is not None
            keys, values = seg.cache.read(layer)
            q = q.reshape(b, t, kv, groups, cfg.head_dim).permute(0, 2, 3, 1, 4).reshape(b, kv, groups * t, -1)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=seg.mask)
            y = y.view(b, kv, groups, t, cfg.head_dim).permute(0, 3, 1, 2, 4)
        return y.reshape(b * t, cfg.dim)


class Block(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(cfg.dim), nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.gate_up = nn.Linear(cfg.dim, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, segments: list[_Bound], layer: int) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), segments, layer)
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def _bind(self, seg: Segment) -> _Bound:
        groups = self.cfg.heads // self.cfg.kv_heads
        cache = seg.cache
        mask = None if cache is None or cache.fresh else cache.mask(seg.positions).repeat(1, 1, groups, 1)
        return _Bound(tuple(seg.tokens.shape), rope_tables(self.cfg, seg.positions), cache, mask)

    def hidden_segments(self, segments: list[Segment]) -> list[torch.Tensor]:
        """Final-norm hidden states (batch, tokens, dim) of every segment, from one forward."""
        bound = [self._bind(s) for s in segments]
        embedded = [self.embed(s.tokens.reshape(-1)) for s in segments]
        x = embedded[0] if len(embedded) == 1 else torch.cat(embedded)
        for i, block in enumerate(self.blocks):
            x = block(x, bound, i)
        sizes = [b.shape[0] * b.shape[1] for b in bound]
        return [h.view(*b.shape, -1) for h, b in zip(self.norm(x).split(sizes), bound, strict=True)]

    def hidden(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Final-norm hidden states (batch, tokens, dim) of ``tokens`` (batch, tokens) at ``positions``.

        Without a cache, or with a ``fresh`` one (every row starts at position 0), the input is a
        whole sequence: causal attention over its own keys (which a cache also stores). Otherwise
        the new keys/values go into the cache first and a query at position p sees keys 0..p."""
        return self.hidden_segments([Segment(tokens, positions, cache)])[0]

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits (batch, tokens, vocab): the LM head over :meth:`hidden`."""
        return self.head(self.hidden(tokens, positions, cache))


def build_decoder(cfg: LLMConfig, seed: int, device: torch.device, dtype: torch.dtype | None = None) -> Decoder:
    """The decoder with weights drawn from ``seed``: N(0, 1) embedding, head rows = the embedding
    permuted, N(0, 0.02) input projections, output projections N(0, 4 / sqrt(fan_in * layers)) (the blocks'
    residual contribution is ~1.5x the embedding's at the default size). ``dtype``: bf16 on
    CUDA, fp32 on a CPU when None."""
    gen = torch.Generator().manual_seed(seed)
    model = Decoder(cfg)
    with torch.no_grad():
        model.embed.weight.normal_(0.0, 1.0, generator=gen)
        perm = torch.randperm(cfg.vocab, generator=gen)
        model.head.weight.copy_(model.embed.weight[perm.argsort()] / cfg.dim ** 0.5)
        for block in model.blocks:
            block.attn.qkv.weight.normal_(0.0, 0.02, generator=gen)
            block.gate_up.weight.normal_(0.0, 0.02, generator=gen)
            for out in (block.attn.out.weight, block.down.weight):
                out.normal_(0.0, 4.0 / (out.shape[1] * cfg.layers) ** 0.5, generator=gen)
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
