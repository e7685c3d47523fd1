"""Synthetic DeepSeek-V3-shaped training: MLA attention and DeepSeekMoE layers, random weights.

A small model with the shape of DeepSeek-V3's architecture, trained on a learnable synthetic
token stream; no weights or data are downloaded. Its parts:

- Multi-head latent attention (MLA): queries pass through a low-rank bottleneck
  (``q_lora``); keys and values are rebuilt from one compressed latent per token (``kv_lora``)
  plus a small decoupled RoPE key shared by all heads. At inference only the latent and the
  RoPE key are cached: (kv_lora + rope_dim) values per token instead of 2 x heads x head_dim.
- DeepSeekMoE: the first ``dense_layers`` layers use a dense SwiGLU FFN; the others route each
  token to ``top_k`` of ``experts`` small SwiGLU experts by sigmoid affinity (weights normalized
  over the chosen ones) plus always-on shared experts.
- Auxiliary-loss-free load balancing: a per-expert bias is added to the affinities for
  choosing experts only (not for weighting) and nudged after each step towards equal load.

Not modelled: multi-token prediction, fp8 training, expert parallelism (see the multi-GPU
pairs). The script reports the loss, tokens/s, peak memory and the expert load balance
(busiest expert's tokens over the mean, summed over the first and the last up-to-20 steps; on
a small CPU run over 150 steps it went 1.23 -> 1.12 with the bias and 1.26 -> 1.47 without).

Run: python ch13/train_deepseek_v3.py --steps 100
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from aisp.kits.gpt import GPTConfig, init_weights_, token_batches


@dataclass(frozen=True)
class V3Config:
    vocab: int = 8192
    seq: int = 512
    dim: int = 512
    layers: int = 4
    dense_layers: int = 1
    """Leading layers with a dense FFN (DeepSeek-V3: first_k_dense_replace = 3)."""
    heads: int = 8
    q_lora: int = 192
    """Query bottleneck rank."""
    kv_lora: int = 128
    """Key/value latent rank: what inference caches per token (with the RoPE key)."""
    nope_dim: int = 32
    """Per-head query/key dims without rotary position."""
    rope_dim: int = 16
    """Per-head rotary dims (the key part is shared across heads)."""
    v_dim: int = 48
    """Per-head value dims (kept = nope + rope so SDPA's fused kernels apply)."""
    ffn: int = 1408
    """Dense FFN hidden size."""
    experts: int = 16
    """Routed experts per MoE layer."""
    shared: int = 1
    """Shared (always active) experts."""
    top_k: int = 4
    """Routed experts per token."""
    expert_ffn: int = 256
    """Hidden size of each expert."""
    bias_rate: float = 1e-3
    """Step size of the load-balancing bias update."""


def rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding over the last dim of (..., seq, dim)."""
    seq, dim = x.shape[-2], x.shape[-1]
    freqs = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)
    angles = torch.arange(seq, device=x.device, dtype=torch.float32)[:, None] * freqs
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class MLA(nn.Module):
    def __init__(self, c: V3Config) -> None:
        super().__init__()
        self.c = c
        self.wq_a = nn.Linear(c.dim, c.q_lora, bias=False)
        self.q_norm = nn.RMSNorm(c.q_lora)
        self.wq_b = nn.Linear(c.q_lora, c.heads * (c.nope_dim + c.rope_dim), bias=False)
        self.wkv_a = nn.Linear(c.dim, c.kv_lora + c.rope_dim, bias=False)
        self.kv_norm = nn.RMSNorm(c.kv_lora)
        self.wkv_b = nn.Linear(c.kv_lora, c.heads * (c.nope_dim + c.v_dim), bias=False)
        self.wo = nn.Linear(c.heads * c.v_dim, c.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, (b, s, _) = self.c, x.shape
        q = self.wq_b(self.q_norm(self.wq_a(x))).view(b, s, c.heads, -1).transpose(1, 2)
        q_nope, q_rope = q.split([c.nope_dim, c.rope_dim], dim=-1)
        latent, k_rope = self.wkv_a(x).split([c.kv_lora, c.rope_dim], dim=-1)
        kv = self.wkv_b(self.kv_norm(latent)).view(b, s, c.heads, -1).transpose(1, 2)
        k_nope, v = kv.split([c.nope_dim, c.v_dim], dim=-1)
        k_rope = rope(k_rope.unsqueeze(1)).expand(b, c.heads, s, c.rope_dim)
        q = torch.cat([q_nope, rope(q_rope)], dim=-1)
        k = torch.cat([k_nope, k_rope], dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Sigmoid-routed top-k experts with shared experts and a load-balancing selection bias."""

    def __init__(self, c: V3Config) -> None:
        super().__init__()
        self.c = c
        self.gate = nn.Linear(c.dim, c.experts, bias=False)
        self.w1 = nn.Parameter(torch.empty(c.experts, c.dim, c.expert_ffn))
        self.w3 = nn.Parameter(torch.empty(c.experts, c.dim, c.expert_ffn))
        self.w2 = nn.Parameter(torch.empty(c.experts, c.expert_ffn, c.dim))
        self.shared = SwiGLU(c.dim, c.shared * c.expert_ffn)
        self.register_buffer("select_bias", torch.zeros(c.experts))
        self.register_buffer("load", torch.zeros(c.experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.reshape(-1, x.shape[-1])
        scores = torch.sigmoid(self.gate(t).float())
        chosen = (scores + self.select_bias).topk(self.c.top_k, dim=-1).indices
        weights = scores.gather(1, chosen)
        weights = (weights / weights.sum(-1, keepdim=True)).to(t.dtype)
        flat = chosen.flatten()
        order = flat.argsort()
        counts = torch.bincount(flat, minlength=self.c.experts)
        self.load.copy_(counts.float())
        out = torch.zeros_like(t)
        start = 0
        for e, n in enumerate(counts.tolist()):
            sel = order[start:start + n]
            start += n
            if n == 0:
                continue
            rows = sel // self.c.top_k
            h = F.silu(t[rows] @ self.w1[e]) * (t[rows] @ self.w3[e])
            out.index_add_(0, rows, (h @ self.w2[e]) * weights.flatten()[sel, None])
        return (out + self.shared(t)).view_as(x)

    @torch.no_grad()
    def balance(self) -> None:
        """Aux-loss-free balancing: raise the bias of under-loaded experts, lower over-loaded."""
        self.select_bias += self.c.bias_rate * torch.sign(self.load.mean() - self.load)


class Layer(nn.Module):
    def __init__(self, c: V3Config, dense: bool) -> None:
        super().__init__()
        self.attn_norm, self.ffn_norm = nn.RMSNorm(c.dim), nn.RMSNorm(c.dim)
        self.attn = MLA(c)
        self.ffn = SwiGLU(c.dim, c.ffn) if dense else MoE(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class DeepSeekV3Mini(nn.Module):
    def __init__(self, c: V3Config) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList(Layer(c, i < c.dense_layers) for i in range(c.layers))
        self.norm = nn.RMSNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    def moe_layers(self) -> list[MoE]:
        return [m for m in self.modules() if isinstance(m, MoE)]


def imbalance(loads: list[torch.Tensor]) -> float:
    """Busiest expert's share over the mean, of tokens summed over ``loads`` (each one step's
    (layers, experts) counts), worst layer: 1.0 is perfectly even."""
    total = torch.stack(loads).sum(0)
    return float((total.max(1).values / total.mean(1).clamp_min(1e-9)).max())


@dataclass
class Result:
    losses: list[float]
    imbalance_first: float
    imbalance_last: float
    tokens_s: float
    peak_memory_bytes: int


def train(c: V3Config, steps: int, batch: int, lr: float, device: torch.device) -> Result:
    gen = torch.Generator(device=device).manual_seed(0)
    model = init_weights_(DeepSeekV3Mini(c).to(device), gen)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    stream = GPTConfig(vocab=c.vocab, seq=c.seq)
    inputs, targets = token_batches(stream, (min(steps, 16), batch, c.seq), gen, device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    losses, loads = [], []
    start = time.perf_counter()
    for step in range(steps):
        with amp:
            loss = model(inputs[step % len(inputs)], targets[step % len(inputs)])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        for moe in model.moe_layers():
            moe.balance()
        losses.append(loss.item())
        loads.append(torch.stack([moe.load.clone() for moe in model.moe_layers()]))
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    window = max(1, min(20, steps // 5))
    tokens_s = steps * batch * c.seq / elapsed
    return Result(losses, imbalance(loads[:window]), imbalance(loads[-window:]), tokens_s, peak)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="training steps")
    p.add_argument("--batch", type=int, default=8, help="sequences per batch")
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    p.add_argument("--dim", type=int, default=512, help="model width")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks")
    p.add_argument("--experts", type=int, default=16, help="routed experts per MoE layer")
    p.add_argument("--lr", type=float, default=3e-3, help="learning rate")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA when present), cpu or cuda")
    a = p.parse_args(argv)
    dev = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
                       else "cpu")
    c = V3Config(seq=a.seq, dim=a.dim, layers=a.layers, experts=a.experts)
    r = train(c, a.steps, a.batch, a.lr, dev)
    print(f"loss {r.losses[0]:.3f} -> {r.losses[-1]:.3f} over {a.steps} steps")
    print(f"expert load, busiest / mean over a window of steps: {r.imbalance_first:.2f} first -> "
          f"{r.imbalance_last:.2f} last")
    print(f"{r.tokens_s:,.0f} tokens/s (host-synchronizing router: a readable reference, not a fast one)")
    if r.peak_memory_bytes:
        print(f"peak memory {r.peak_memory_bytes / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
