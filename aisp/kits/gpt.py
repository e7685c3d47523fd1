"""A small pre-norm GPT that chapters share (training steps, memory, compile, serving).

nanoGPT-shaped: token + position embeddings, N blocks of causal attention and a GELU MLP, final
norm, untied LM head. Weights are drawn from a caller's seeded generator (:func:`init_weights_`),
so a pair's baseline and optimized variants start from the same parameters, and
:func:`token_batches` makes a learnable synthetic token stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 8192
    """Vocabulary size (LM head width)."""
    seq: int = 512
    """Longest sequence (position table size)."""
    dim: int = 512
    """Model width."""
    heads: int = 8
    """Attention heads (dim must divide by it)."""
    layers: int = 4
    """Transformer blocks."""

    def params(self) -> int:
        """Parameter count: embeddings, blocks (12 d^2 + 4 d norms each), final norm, head."""
        d = self.dim
        return self.vocab * d * 2 + self.seq * d + self.layers * (12 * d * d + 4 * d) + 2 * d

    def train_flops(self, batch: int, seq: int) -> float:
        """FLOPs of one forward+backward: 6 per weight per token for the matmuls, plus causal
        attention (QK^T and PV, half the square, times 3 for forward and backward)."""
        tokens = batch * seq
        matmul = 6.0 * tokens * (self.layers * 12 * self.dim**2 + self.vocab * self.dim)
        attention = 3.0 * 2.0 * 2.0 * batch * self.layers * self.dim * seq * seq / 2
        return matmul + attention


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.fc = nn.Linear(cfg.dim, 4 * cfg.dim, bias=False)
        self.out = nn.Linear(4 * cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class BlockStack(nn.Module):
    """``cfg.layers`` transformer blocks on hidden states, without embeddings or head: what the
    compile pairs (ch13 regional_compile, ch14 compile_modes) compile."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, checkpoint_blocks: bool = False) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.seq, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.checkpoint_blocks = checkpoint_blocks

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, mean next-token cross-entropy)."""
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block in self.blocks:
            if self.checkpoint_blocks and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        return logits, loss


def init_weights_(model: nn.Module, gen: torch.Generator) -> nn.Module:
    """GPT-2 style init from ``gen``: N(0, 0.02) matrices and embeddings, unit norms, zero biases."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02, generator=gen)
            elif name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    return model


def token_batches(cfg: GPTConfig, shape: tuple[int, ...], gen: torch.Generator,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic, learnable token streams of ``shape`` (..., seq): each next token is a fixed
    random permutation of the current one, so a model can drive the loss down.
    Returns (inputs, next-token targets)."""
    perm = torch.randperm(cfg.vocab, generator=gen, device=device)
    first = torch.randint(cfg.vocab, (*shape[:-1], 1), generator=gen, device=device)
    tokens = [first]
    for _ in range(shape[-1]):
        tokens.append(perm[tokens[-1]])
    stream = torch.cat(tokens, dim=-1)
    return stream[..., :-1].contiguous(), stream[..., 1:].contiguous()
