"""Reference training loop in a DeepSeek-Coder-shaped configuration, eager vs ``torch.compile``.

DeepSeek-Coder is a dense LLaMA-style decoder (no MoE, unlike ``train_deepseek_v3.py``): RMSNorm,
a SwiGLU FFN about 2.7x the width, rotary positions with a large base (100,000) and linear position
interpolation (factor 4: trained at 4K tokens, used at 16K), grouped-query attention in the large
model (33B: 56 query heads share 8 key/value heads), and a fill-in-the-middle (FIM) objective:
half the training documents are cut into prefix, middle and suffix and reordered
``<begin> prefix <hole> suffix <end> middle`` so the model learns to infill code.

This script trains that shape on a learnable synthetic token stream (random weights, nothing
downloaded) twice from the same seed, eager and then compiled, and reports what chapter 13
measures: both loss curves (they must agree: compilation changes speed, not math), tokens/s over
the steady steps (compile time excluded, reported apart) and peak memory. The ``tiny`` preset runs
on a CPU in seconds; ``1.3b`` is deepseek-coder-1.3b's shape, for a GPU. On a GPU the steps run in
bf16 autocast. Figures: not yet measured on a GPU.

Run: python ch13/train_deepseek_coder.py --steps 30
     python ch13/train_deepseek_coder.py --preset 1.3b --seq 2048 --batch 4 --steps 40
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from aisp.kits.gpt import GPTConfig, init_weights_, token_batches


@dataclass(frozen=True)
class CoderConfig:
    vocab: int = 1024
    """Vocabulary, the last three ids being the FIM markers (DeepSeek-Coder: 32,256)."""
    seq: int = 128
    """Training sequence length."""
    dim: int = 128
    layers: int = 2
    heads: int = 8
    kv_heads: int = 2
    """Key/value heads shared by groups of query heads (GQA; equal to heads is plain multi-head)."""
    ffn: int = 344
    """SwiGLU hidden size (DeepSeek-Coder 6.7B: 11,008 for 4,096, about 2.69x)."""
    rope_base: float = 100_000.0
    rope_scale: float = 4.0
    """Linear position interpolation: positions are divided by this."""
    fim_rate: float = 0.5
    """Share of sequences reordered for fill-in-the-middle."""


PRESETS = {"tiny": CoderConfig(),
           "1.3b": CoderConfig(vocab=32256, seq=2048, dim=2048, layers=24, heads=16, kv_heads=16, ffn=5504)}


DATA_BATCHES = 16
"""Distinct batches drawn and cycled (the same for any step count, so runs of different lengths
see the same data)."""


def fim_ids(c: CoderConfig) -> tuple[int, int, int]:
    """(begin, hole, end) marker ids: the top of the vocabulary."""
    return c.vocab - 3, c.vocab - 2, c.vocab - 1


def fim_permute(tokens: torch.Tensor, c: CoderConfig, gen: torch.Generator) -> torch.Tensor:
    """Reorder a share ``fim_rate`` of rows (batch, n) into prefix-suffix-middle form with the three
    markers, keeping each row's length n (the last three tokens are dropped to make room)."""
    begin, hole, end = (torch.tensor([t], device=tokens.device) for t in fim_ids(c))
    rows = []
    for row in tokens:
        body = row[: row.numel() - 3]
        if torch.rand((), generator=gen, device=gen.device).item() >= c.fim_rate:
            rows.append(row)
            continue
        cut = torch.randint(0, body.numel() + 1, (2,), generator=gen, device=gen.device).sort().values.tolist()
        prefix, middle, suffix = body[: cut[0]], body[cut[0]: cut[1]], body[cut[1]:]
        rows.append(torch.cat([begin, prefix, hole, suffix, end, middle]))
    return torch.stack(rows)


def rope_tables(c: CoderConfig, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (seq, head_dim / 2) at interpolated positions (position / rope_scale)."""
    inv = c.rope_base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = (torch.arange(c.seq, device=device, dtype=torch.float32) / c.rope_scale)[:, None] * inv
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of (batch, heads, seq, head_dim), the halves pairing as in LLaMA's layout."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[: x.shape[-2]].to(x.dtype), sin[: x.shape[-2]].to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    """Causal self-attention with grouped key/value heads."""

    def __init__(self, c: CoderConfig) -> None:
        super().__init__()
        self.c, self.head_dim = c, c.dim // c.heads
        self.q = nn.Linear(c.dim, c.heads * self.head_dim, bias=False)
        self.kv = nn.Linear(c.dim, 2 * c.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(c.heads * self.head_dim, c.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.c.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.c.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.c.kv_heads != self.c.heads)
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


class GatedFFN(nn.Module):
    """SwiGLU with the gate and up projections in one matmul."""

    def __init__(self, c: CoderConfig) -> None:
        super().__init__()
        self.gate_up = nn.Linear(c.dim, 2 * c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, c: CoderConfig) -> None:
        super().__init__()
        self.attn_norm, self.ffn_norm = nn.RMSNorm(c.dim), nn.RMSNorm(c.dim)
        self.attn, self.ffn = Attention(c), GatedFFN(c)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class DeepSeekCoderMini(nn.Module):
    def __init__(self, c: CoderConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.RMSNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)
        cos, sin = rope_tables(c, c.dim // c.heads, torch.device("cpu"))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@dataclass
class Result:
    losses: list[float]
    tokens_s: float
    """Over the steps after ``warmup`` (compilation and allocator warm-up excluded)."""
    first_steps_s: float
    """Seconds of the first ``warmup`` steps (where compilation happens)."""
    peak_memory_bytes: int


def batches(c: CoderConfig, count: int, batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of shape (count, batch, seq): the learnable stream, FIM-reordered, shifted."""
    gen = torch.Generator(device=device).manual_seed(1)
    stream = GPTConfig(vocab=c.vocab - 3, seq=c.seq)
    inputs, targets = token_batches(stream, (count, batch, c.seq), gen, device)
    full = torch.cat([inputs, targets[..., -1:]], dim=-1).flatten(0, 1)
    mixed = fim_permute(full, c, gen).view(count, batch, c.seq + 1)
    return mixed[..., :-1], mixed[..., 1:]


def train(c: CoderConfig, steps: int, batch: int, device: torch.device, compiled: bool,
          backend: str = "inductor", lr: float = 3e-3, warmup: int = 3) -> Result:
    """``steps`` AdamW steps from seed 0 on DATA_BATCHES cycled batches; eager, or compiled with
    ``backend`` (inductor generates kernels; aot_eager only traces, a quick check of the capture)."""
    torch.manual_seed(0)
    model = init_weights_(DeepSeekCoderMini(c).to(device), torch.Generator(device=device).manual_seed(0))
    step_fn = torch.compile(model, backend=backend) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    inputs, targets = batches(c, DATA_BATCHES, batch, device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    losses, start, steady = [], time.perf_counter(), None
    for step in range(steps):
        if step == warmup:
            sync()
            steady = time.perf_counter()
        with amp:
            loss = step_fn(inputs[step % len(inputs)], targets[step % len(inputs)])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    sync()
    end = time.perf_counter()
    steady = steady or start
    timed_steps = steps - warmup if steps > warmup else steps
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    return Result(losses, timed_steps * batch * c.seq / (end - steady), steady - start, peak)


def _config(a: argparse.Namespace) -> CoderConfig:
    base = PRESETS[a.preset]
    sizes = {k: getattr(a, k) for k in ("seq", "dim", "layers") if getattr(a, k) is not None}
    return replace(base, **sizes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny", help="Model shape (default tiny, CPU-sized).")
    p.add_argument("--steps", type=int, default=30, help="Optimizer steps per mode (default 30).")
    p.add_argument("--batch", type=int, default=4, help="Sequences per step (default 4).")
    p.add_argument("--seq", type=int, default=None, help="Sequence length (default: the preset's).")
    p.add_argument("--dim", type=int, default=None, help="Model width (default: the preset's).")
    p.add_argument("--layers", type=int, default=None, help="Decoder blocks (default: the preset's).")
    p.add_argument("--eager-only", action="store_true", help="Skip the compiled run.")
    p.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor).")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="Where to train (default auto).")
    a = p.parse_args(argv)
    if a.steps < 4:
        p.error("--steps must be at least 4 (3 warmup steps, then timed ones)")
    device = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) else "cpu")
    c = _config(a)
    runs = {"eager": train(c, a.steps, a.batch, device, compiled=False)}
    if not a.eager_only:
        runs["compiled"] = train(c, a.steps, a.batch, device, compiled=True, backend=a.backend)
    for mode, r in runs.items():
        memory = f", peak memory {r.peak_memory_bytes / 2**30:.2f} GiB" if r.peak_memory_bytes else ""
        print(f"{mode:>8}: loss {r.losses[0]:.3f} -> {r.losses[-1]:.3f}, {r.tokens_s:,.0f} tokens/s steady, "
              f"first 3 steps {r.first_steps_s:.1f} s{memory}")
    if "compiled" in runs:
        eager, comp = runs["eager"], runs["compiled"]
        gap = max(abs(x - y) for x, y in zip(eager.losses[:5], comp.losses[:5], strict=True))
        print(f"compiled / eager tokens/s: {comp.tokens_s / eager.tokens_s:.2f}x; "
              f"largest loss difference over the first 5 steps: {gap:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
