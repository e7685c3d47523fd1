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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aisp.kits.llm.cache import KVCache
from aisp.kits.llm.config import LLMConfig
from aisp.kits.llm.rope import apply_rope, rope_tables, rotate_, rotation

__all__ = ["Decoder", "Segment", "additive_mask", "apply_rope", "build_decoder", "rope_tables", "rotate_", "rotation"]


def additive_mask(visible: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (batch, 1, tokens, keys) as SDPA's additive one (0 / -inf) in ``dtype`` for
    query rows folded as (group, token), built once per forward: SDPA would convert a boolean mask in
    every layer. Rows are padded to 8 keys so the memory-efficient kernel takes it without a copy."""
    b, _, t, keys = visible.shape
    bias = torch.zeros(b, 1, groups, t, -(-keys // 8) * 8, dtype=dtype, device=visible.device)
    bias[..., :keys].masked_fill_(visible.logical_not()[:, :, None], float("-inf"))
    return bias.view(b, 1, groups * t, -1)[..., :keys]


@functools.cache
def _causal_lower_right() -> Callable[[int, int], Any]:
    """torch's ``causal_lower_right``, imported on first use: torch.nn.attention.bias imports torch._dynamo,
    ~3 s of CPU in every process that loads the kit (each serving rank and worker), and only the cached
    prefill needs it; cached, so a call in a host-bound loop pays no import statement. A process pays the
    import at its first cached prefill: in the harness a checked or warm-up call, not a timed one."""
    from torch.nn.attention.bias import causal_lower_right

    return causal_lower_right


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
    """A segment as attention sees it: its shape, cache step and mask: None (causal over its own
    keys, or over the cache ending at its last token when ``cache.tail``), or additive (folded rows)."""

    shape: tuple[int, int]
    cache: KVCache | None
    mask: torch.Tensor | None


@dataclass(frozen=True)
class _Forward:
    """What every layer of one forward shares: the segments and the RoPE tables of all tokens."""

    segments: list[_Bound]
    rope: tuple[torch.Tensor, torch.Tensor]


class Attention(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        kv = cfg.kv_heads * cfg.head_dim
        self.qkv = nn.Linear(cfg.dim, cfg.dim + 2 * kv, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, fwd: _Forward, layer: int) -> torch.Tensor:
        """``x`` (all segments' tokens, dim) -> attention output, same shape."""
        cfg = self.cfg
        heads = self.qkv(x).view(len(x), -1, cfg.head_dim)  # query heads, then K heads, then V heads
        rotate_(heads[:, :cfg.heads + cfg.kv_heads], *fwd.rope)
        if len(fwd.segments) == 1:
            return self.out(self._attend(heads.view(*fwd.segments[0].shape, *heads.shape[1:]), fwd.segments[0], layer))
        outs, start = [], 0
        for seg in fwd.segments:
            n = seg.shape[0] * seg.shape[1]
            outs.append(self._attend(heads[start:start + n].view(*seg.shape, *heads.shape[1:]), seg, layer))
            start += n
        return self.out(torch.cat(outs))

    def _attend(self, heads: torch.Tensor, seg: _Bound, layer: int) -> torch.Tensor:
        """Attention of one segment's rotated ``heads`` (batch, tokens, heads + 2 kv_heads, head_dim):
        see :class:`_Bound`."""
        cfg, (b, t, _, _) = self.cfg, heads.shape
        kv, groups = cfg.kv_heads, cfg.heads // cfg.kv_heads
        q, k, v = heads.split([cfg.heads, kv, kv], dim=2)
        if seg.cache is not None:
            seg.cache.write(layer, k, v)
        if seg.mask is None:  # flash attention (GQA without a copy of the K/V heads)
            if seg.cache is None or seg.cache.fresh:
                keys, values, causal = k.transpose(1, 2), v.transpose(1, 2), None
            else:  # the new tokens are the cache's last ones: causal aligned to the lower right
                keys, values = seg.cache.read(layer)
                causal = _causal_lower_right()(t, keys.shape[2])
            y = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=causal,
                                               is_causal=causal is None, enable_gqa=True).transpose(1, 2)
        else:  # each K/V head's query heads folded into its rows: no copy of the cache
            keys, values = seg.cache.read(layer)
            if t == 1:  # a decode step: the heads already are (K/V head, group) rows
                return F.scaled_dot_product_attention(q.view(b, kv, groups, -1), keys, values,
                                                      attn_mask=seg.mask).view(b, cfg.dim)
            q = q.reshape(b, t, kv, groups, cfg.head_dim).permute(0, 2, 3, 1, 4).reshape(b, kv, groups * t, -1)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=seg.mask)
            y = y.view(b, kv, groups, t, cfg.head_dim).permute(0, 3, 1, 2, 4)
        return y.reshape(b * t, cfg.dim)


class Block(nn.Module):
    mlp_rows: int | None = None
    """Most rows the MLP computes at once when a forward has more (a prefill); None: all of them."""

    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(cfg.dim), nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.gate_up = nn.Linear(cfg.dim, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.dim, bias=False)
        self.ffn = cfg.ffn

    def forward(self, x: torch.Tensor, fwd: _Forward, layer: int) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), fwd, layer)
        if self.mlp_rows is not None and len(x) > self.mlp_rows:
            return self.mlp_in_row_blocks(x)
        gate_up, ffn = self.gate_up(self.norm2(x)), self.ffn
        return x + self.down(F.silu(gate_up[:, :ffn]) * gate_up[:, ffn:])

    def mlp_in_row_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP on ``mlp_rows`` rows at a time, each block's output added in place to its rows of
        ``x`` (a fresh tensor): one block's gate/up, SiLU and product live at once, not the forward's.
        Row-wise like the whole (RMSNorm and the GEMMs), so the same up to GEMM rounding."""
        for start in range(0, len(x), self.mlp_rows):
            part = x[start:start + self.mlp_rows]
            gate_up = self.gate_up(self.norm2(part))
            act = F.silu(gate_up[:, :self.ffn]) * gate_up[:, self.ffn:]
            del gate_up
            part.add_(self.down(act))
        return x


class Decoder(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def _bind(self, seg: Segment, dtype: torch.dtype) -> _Bound:
        cache, groups = seg.cache, self.cfg.heads // self.cfg.kv_heads
        if cache is None or cache.fresh or cache.tail:
            return _Bound(tuple(seg.tokens.shape), cache, None)
        mask = additive_mask(cache.mask(seg.positions), groups, dtype)
        return _Bound(tuple(seg.tokens.shape), cache, mask)

    def hidden_segments(self, segments: list[Segment]) -> list[torch.Tensor]:
        """Final-norm hidden states (batch, tokens, dim) of every segment, from one forward."""
        one = len(segments) == 1
        positions = segments[0].positions.reshape(-1) if one else torch.cat([s.positions.reshape(-1) for s in segments])
        tokens = segments[0].tokens.reshape(-1) if one else torch.cat([s.tokens.reshape(-1) for s in segments])
        x = self.embed(tokens)
        fwd = _Forward([self._bind(s, x.dtype) for s in segments], rotation(self.cfg, positions, x.dtype))
        for i, block in enumerate(self.blocks):
            x = block(x, fwd, i)
        sizes = [b.shape[0] * b.shape[1] for b in fwd.segments]
        return [h.view(*b.shape, -1) for h, b in zip(self.norm(x).split(sizes), fwd.segments, strict=True)]

    def hidden(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Final-norm hidden states (batch, tokens, dim) of ``tokens`` (batch, tokens) at ``positions``.

        Without a cache, or with a ``fresh`` one (every row starts at position 0), the input is a
        whole sequence: causal attention over its own keys (which a cache also stores). Otherwise
        the new keys/values go into the cache first and a query at position p sees keys 0..p."""
        return self.hidden_segments([Segment(tokens, positions, cache)])[0]

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits (batch, tokens, vocab): the LM head over :meth:`hidden`."""
        return self.head(self.hidden(tokens, positions, cache))


def build_decoder(cfg: LLMConfig, seed: int, device: torch.device, dtype: torch.dtype | None = None,
                  draw_on_device: bool = False) -> Decoder:
    """The decoder with weights drawn from ``seed``: N(0, 1) embedding, head rows = the embedding
    permuted, N(0, 0.02) input projections, output projections N(0, 4 / sqrt(fan_in * layers)) (the blocks'
    residual contribution is ~1.5x the embedding's at the default size). ``dtype``: bf16 on
    CUDA, fp32 on a CPU when None. The weights are drawn on the CPU (the same on every device)
    unless ``draw_on_device``: then on ``device`` with its generator, for billion-parameter
    decoders, which a CPU thread takes tens of seconds to draw."""
    where = device if draw_on_device else torch.device("cpu")
    gen = torch.Generator(device=where).manual_seed(seed)
    with where:
        model = Decoder(cfg)
    with torch.no_grad():
        model.embed.weight.normal_(0.0, 1.0, generator=gen)
        perm = torch.randperm(cfg.vocab, generator=gen, device=where)
        model.head.weight.copy_(model.embed.weight[perm.argsort()] / cfg.dim ** 0.5)
        for block in model.blocks:
            block.attn.qkv.weight.normal_(0.0, 0.02, generator=gen)
            block.gate_up.weight.normal_(0.0, 0.02, generator=gen)
            for out in (block.attn.out.weight, block.down.weight):
                out.normal_(0.0, 4.0 / (out.shape[1] * cfg.layers) ** 0.5, generator=gen)
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
