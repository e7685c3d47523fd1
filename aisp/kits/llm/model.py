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


class Attention(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        kv = cfg.kv_heads * cfg.head_dim
        self.qkv = nn.Linear(cfg.dim, cfg.dim + 2 * kv, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], layer: int,
                cache: KVCache | None, mask: torch.Tensor | None) -> torch.Tensor:
        """Causal self-attention over the new tokens when ``mask`` is None, else over the cache."""
        cfg, (b, t, _) = self.cfg, x.shape
        kv, groups = cfg.kv_heads, cfg.heads // cfg.kv_heads
        q, k, v = self.qkv(x).split([cfg.dim, kv * cfg.head_dim, kv * cfg.head_dim], -1)
        qk = apply_rope(torch.cat([q, k], -1).view(b, t, cfg.heads + kv, cfg.head_dim), *rope)
        q, k, v = qk[:, :, :cfg.heads], qk[:, :, cfg.heads:], v.view(b, t, kv, cfg.head_dim)
        if cache is not None:
            cache.write(layer, k, v)
        if mask is None:  # K/V heads repeated for the query heads they serve (a prefill-sized copy)
            keys, values = (z.transpose(1, 2).repeat_interleave(groups, 1) for z in (k, v))
            y = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, is_causal=True).transpose(1, 2)
        else:  # each K/V head's query heads folded into its rows: no copy of the cache
            keys, values = cache.read(layer)
            q = q.reshape(b, t, kv, groups, cfg.head_dim).permute(0, 2, 3, 1, 4).reshape(b, kv, groups * t, -1)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            y = y.view(b, kv, groups, t, cfg.head_dim).permute(0, 3, 1, 2, 4)
        return self.out(y.reshape(b, t, cfg.dim))


class Block(nn.Module):
    def __init__(self, cfg: LLMConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(cfg.dim), nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.gate_up = nn.Linear(cfg.dim, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], layer: int,
                cache: KVCache | None, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), rope, layer, cache, mask)
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

    def hidden(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Final-norm hidden states (batch, tokens, dim) of ``tokens`` (batch, tokens) at ``positions``.

        Without a cache, or with a ``fresh`` one (every row starts at position 0), the input is a
        whole sequence: causal attention over its own keys (which a cache also stores). Otherwise
        the new keys/values go into the cache first and a query at position p sees keys 0..p."""
        rope = rope_tables(self.cfg, positions)
        groups = self.cfg.heads // self.cfg.kv_heads
        mask = None if cache is None or cache.fresh else cache.mask(positions).repeat(1, 1, groups, 1)
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, rope, i, cache, mask)
        return self.norm(x)

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
