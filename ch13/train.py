"""Reference training loop: a small GPT on synthetic tokens, profiled end to end.

Trains ch13_gpt.GPT with AdamW on up to 16 batches of a learnable synthetic stream, cycled
(nothing is downloaded), and
reports what chapter 13 measures: the loss curve, goodput (tokens per second over the steady
steps, after warmup and compilation), peak memory, and, with ``--profile-dir``, a
torch.profiler trace of a few steady steps (open ``trace.json`` in Perfetto or
chrome://tracing) with the top operators by device time in ``ops.txt``. Switches map to the
chapter's pairs: ``--compile`` (training_standard), ``--amp bf16`` (precisionmixed),
``--checkpoint`` (activation_checkpointing).

Run: python ch13/train.py --steps 50 --compile --amp bf16 --profile-dir artifacts/ch13_train
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches


@dataclass(frozen=True)
class TrainConfig:
    model: GPTConfig = field(default_factory=GPTConfig)
    """Model shape."""
    batch: int = 16
    """Sequences per step."""
    steps: int = 50
    """Optimizer steps."""
    warmup: int = 5
    """Steps excluded from goodput (compilation, allocator warm-up)."""
    lr: float = 3e-3
    """AdamW learning rate."""
    compile: bool = False
    """torch.compile the model."""
    amp: str = "bf16"
    """Autocast dtype: bf16 or none (fp32)."""
    checkpoint: bool = False
    """Activation checkpointing per block."""
    profile_dir: Path | None = None
    """Where to write trace.json and ops.txt (None: no profiling)."""
    device: str = "auto"
    """auto, cpu or cuda."""


@dataclass
class TrainResult:
    losses: list[float]
    goodput_tokens_s: float
    peak_memory_bytes: int


def pick_device(choice: str) -> torch.device:
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _profiler(cfg: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    if cfg.profile_dir is None:
        return contextlib.nullcontext()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    return profile(activities=activities, schedule=schedule(wait=cfg.warmup, warmup=1, active=3),
                   profile_memory=True, record_shapes=True)


def _save_profile(prof: profile, cfg: TrainConfig, device: torch.device) -> None:
    cfg.profile_dir.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(cfg.profile_dir / "trace.json"))
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    (cfg.profile_dir / "ops.txt").write_text(prof.key_averages().table(sort_by=key, row_limit=25))


def train(cfg: TrainConfig) -> TrainResult:
    device = pick_device(cfg.device)
    gen = torch.Generator(device=device).manual_seed(0)
    model = init_weights_(GPT(cfg.model, cfg.checkpoint).to(device), gen)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, fused=device.type == "cuda")
    step_fn = torch.compile(model) if cfg.compile else model
    amp = torch.autocast(device.type, dtype=torch.bfloat16) if cfg.amp == "bf16" else contextlib.nullcontext()
    inputs, targets = token_batches(cfg.model, (min(cfg.steps, 16), cfg.batch, cfg.model.seq), gen, device)
    losses, start = [], 0.0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with _profiler(cfg, device) as prof:
        for step in range(cfg.steps):
            if step == cfg.warmup:
                _sync(device)
                start = time.perf_counter()
            with amp:
                _, loss = step_fn(inputs[step % len(inputs)], targets[step % len(inputs)])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
            if prof is not None:
                prof.step()
    _sync(device)
    steady = max(cfg.steps - cfg.warmup, 1)
    goodput = steady * cfg.batch * cfg.model.seq / (time.perf_counter() - start)
    if prof is not None:
        _save_profile(prof, cfg, device)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    return TrainResult([float(x) for x in losses], goodput, peak)


def parse(argv: list[str] | None) -> TrainConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50, help="training steps")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the throughput")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch")
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    p.add_argument("--dim", type=int, default=512, help="model width")
    p.add_argument("--heads", type=int, default=8, help="attention heads")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size")
    p.add_argument("--lr", type=float, default=3e-3, help="learning rate")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16", help="autocast precision (none: fp32)")
    p.add_argument("--checkpoint", action="store_true", help="activation checkpointing of each block (less memory, more compute)")
    p.add_argument("--profile-dir", type=Path, help="write a torch.profiler trace here")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA when present), cpu or cuda")
    a = p.parse_args(argv)
    model = GPTConfig(vocab=a.vocab, seq=a.seq, dim=a.dim, heads=a.heads, layers=a.layers)
    return TrainConfig(model, a.batch, a.steps, a.warmup, a.lr, a.compile, a.amp, a.checkpoint,
                       a.profile_dir, a.device)


def main(argv: list[str] | None = None) -> int:
    cfg = parse(argv)
    result = train(cfg)
    for i in range(0, len(result.losses), max(1, len(result.losses) // 10)):
        print(f"step {i:4d}  loss {result.losses[i]:.4f}")
    print(f"final loss {result.losses[-1]:.4f} (from {result.losses[0]:.4f})")
    print(f"goodput {result.goodput_tokens_s:,.0f} tokens/s over {cfg.steps - cfg.warmup} steady steps")
    if result.peak_memory_bytes:
        print(f"peak memory {result.peak_memory_bytes / 2**30:.2f} GiB")
    if cfg.profile_dir is not None:
        print(f"profile: {cfg.profile_dir / 'trace.json'}, {cfg.profile_dir / 'ops.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
