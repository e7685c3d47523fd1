"""FSDP2 vs DDP: one small GPT trained both ways; memory per rank and step time.

DDP keeps a whole replica on every rank (fp32 parameters, gradients and both AdamW moments:
16 bytes per parameter) and all-reduces the gradients. FSDP2 (``fully_shard`` on each
transformer block, then on the root for the embeddings and head) keeps 1/world of each: it
all-gathers a block's parameters just before the block's forward (and again for its backward)
and reduce-scatters its gradients, prefetching the next block's gather while this one computes.
Expect on 2 GPUs: the training state per rank halves and the peak memory drops by about that
much; the step time stays within a few tens of percent of DDP's (1.5x the bytes on the wire,
mostly hidden behind compute). Measured on 2 x H200 (preset small): state 11,298 -> 5,649 MiB
per rank, peak 26,067/23,242 -> 16,893/16,893 MiB (rank 0/1), step 96.3 -> 93.7 ms, per-step
losses within 6.5e-6 relative.

Check: both runs start from the same weights and see the same batches, so their per-step losses
must agree (to bf16 autocast noise on a GPU); a model sharded or synchronized wrongly fails and
the script exits 1.

Run: torchrun --nproc-per-node 2 ch13/fsdp_example.py [--preset small] [--steps 10]
     torchrun --nproc-per-node 2 ch13/fsdp_example.py --preset tiny --device cpu   (gloo)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from aisp.harness.stats import summarize
from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches
from aisp.kits.multirank import script_init, time_slowest

PRESETS = {
    "small": (GPTConfig(vocab=32768, seq=1024, dim=2048, heads=16, layers=12), 8),
    "tiny": (GPTConfig(vocab=256, seq=32, dim=64, heads=4, layers=2), 2),
}
"""Model and sequences per rank per step. small: ~0.74 B parameters (~12 GiB of DDP state)."""
LOSS_RTOL = {"cuda": 2e-2, "cpu": 1e-4}
"""Per-step loss agreement: bf16 autocast on a GPU reorders and rounds; fp32 on a CPU does not."""


def build(cfg: GPTConfig, device: torch.device) -> torch.nn.Module:
    """The same initial weights on every rank and in both runs (seed 0)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    return init_weights_(GPT(cfg).to(device), gen)


def wrap_ddp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def wrap_fsdp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and optimizer state this rank holds (its shards under FSDP)."""
    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if isinstance(t, DTensor) else t

    tensors = [local(p) for p in model.parameters()]
    tensors += [local(p.grad) for p in model.parameters() if p.grad is not None]
    tensors += [local(v) for s in optimizer.state.values() for v in s.values()
                if isinstance(v, torch.Tensor) and v.dim() > 0]
    return sum(t.numel() * t.element_size() for t in tensors)


def train(mode: str, args: argparse.Namespace, device: torch.device) -> dict[str, object]:
    """Train ``steps`` steps; returns losses, slowest-rank step times and memory per rank."""
    cfg, batch = PRESETS[args.preset]
    wrap: Callable[[torch.nn.Module, torch.device], torch.nn.Module] = wrap_ddp if mode == "DDP" else wrap_fsdp
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    model = wrap(build(cfg, device), device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device=device)
    gen.manual_seed(1 + dist.get_rank())
    idx, targets = token_batches(cfg, (args.steps, batch, cfg.seq), gen, device)
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext())
    losses: list[float] = []

    def step() -> None:
        i = len(losses)
        optimizer.zero_grad(set_to_none=True)
        with amp:
            _, loss = model(idx[i], targets[i])
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())

    times = time_slowest(step, device, args.steps)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    result = {"mode": mode, "losses": [float(x) for x in losses], "step_ms": summarize(times[args.warmup:]).median,
              "state_bytes": gather_int(state_bytes(model, optimizer)),
              "peak_bytes": gather_int(peak) if peak is not None else None}
    return result


def gather_int(value: int) -> list[int]:
    out: list[int] = [0] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def report(runs: list[dict[str, object]], rtol: float) -> bool:
    """Print the comparison (rank 0); True when the two runs' losses agree."""
    mib = 2.0**20
    print(f"{'mode':<6} {'step ms':>9} {'state MiB per rank':>20} {'peak MiB per rank':>20} {'last loss':>10}")
    for r in runs:
        state = " ".join(f"{b / mib:.1f}" for b in r["state_bytes"])
        peak = " ".join(f"{b / mib:.0f}" for b in r["peak_bytes"]) if r["peak_bytes"] else "-"
        print(f"{r['mode']:<6} {r['step_ms']:>9.1f} {state:>20} {peak:>20} {r['losses'][-1]:>10.4f}")
    ddp, fsdp = (torch.tensor(r["losses"], dtype=torch.float64) for r in runs)
    worst = float(((fsdp - ddp).abs() / ddp.abs()).max())
    agree = worst <= rtol
    print(f"per-step losses {'agree' if agree else 'DIFFER'}: largest relative difference {worst:.2e} "
          f"(tolerance {rtol:g})")
    return agree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small", help="model size")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the step time")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA with NCCL when present), cpu (gloo) or cuda")
    parser.add_argument("--json", type=Path, help="also write both runs' figures here (rank 0)")
    args = parser.parse_args(argv)
    if args.steps <= args.warmup + 1:
        parser.error("--steps must exceed --warmup by at least 2")
    device = script_init(args.device)
    runs = [train(mode, args, device) for mode in ("DDP", "FSDP2")]
    agree = True
    if dist.get_rank() == 0:
        print(f"{args.preset} GPT over {dist.get_world_size()} ranks ({dist.get_backend()}), "
              f"{args.steps} AdamW steps each; step time: slowest rank, median after {args.warmup} warmup steps")
        agree = report(runs, LOSS_RTOL[device.type])
        if args.json:
            args.json.write_text(json.dumps({"losses_agree": agree, "runs": runs}, indent=2) + "\n")
    verdict = torch.tensor([int(agree)], device=device)
    dist.broadcast(verdict, src=0)
    # The wrapped models sit in reference cycles (module hooks); free them, and the communication
    # work they hold, while the process group is alive rather than at interpreter exit.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    return 0 if verdict.item() else 1


if __name__ == "__main__":
    sys.exit(main())
