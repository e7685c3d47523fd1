"""Chapter 3 pinning example: a training loop whose rank, DataLoader workers and host buffers sit
on the NUMA node of its GPU.

Each rank (LOCAL_RANK under torchrun; rank 0 alone otherwise) finds its GPU's node and local CPUs,
binds itself before it builds the DataLoader or the model (so every thread it creates inherits the
binding), gives each worker its own local core through ``worker_init_fn`` (no CUDA call there) and
keeps those cores out of the main process's set, pins batches (``pin_memory=True``) and copies them
with ``non_blocking=True``. It prints samples/s and where its threads and memory ended up. ``--no-bind`` runs the same loop unbound, to compare.
Without CUDA it runs on the CPU (gloo for several ranks), binding to the node of its CPUs.

Run: python ch03/train.py --steps 50
     torchrun --nproc-per-node=8 ch03/train.py --steps 200
     python ch03/train.py --no-bind   (then compare samples/s and the placement lines)
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from ch03_common import SyntheticImages
from torch.utils.data import DataLoader

from aisp.system import numa


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps per rank")
    parser.add_argument("--batch", type=int, default=64, help="images per batch")
    parser.add_argument("--side", type=int, default=64, help="image side in pixels (side x side, 3 channels)")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers per rank, each on its own local core")
    parser.add_argument("--no-bind", action="store_true", help="leave placement to the scheduler")
    return parser.parse_args()


def placement(rank: int, device: torch.device, workers: int, bind: bool) -> tuple[numa.Locality, object]:
    """Bind this rank to its GPU's node; return the locality and the workers' init function."""
    loc = numa.device_locality(device.type, device.index or 0)
    if not bind:
        return loc, None
    main, init_worker = numa.split_for_workers(numa.local_binding(loc), workers)
    numa.bind_process(main)
    print(f"rank {rank}: main process on CPUs {numa.format_cpulist(main.cpus)}, workers on "
          f"{numa.format_cpulist(init_worker.binding.cpus)}, node {main.node} [{loc.source}]")
    return loc, init_worker


def model_for(side: int, device: torch.device, world: int) -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * side * side, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(device)
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return model


def sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def main() -> None:
    args = parse()
    rank, world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    loc, init_fn = placement(rank, device, args.workers, not args.no_bind)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")
    data = SyntheticImages(args.side, args.batch * args.steps, seed=rank)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers, pin_memory=cuda,
                        worker_init_fn=init_fn, persistent_workers=args.workers > 0)
    model = model_for(args.side, device, world)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = None
    for step, x in enumerate(loader):
        if step == 5:
            sync(cuda)
            start = time.perf_counter()
        x = x.to(device, non_blocking=True)
        labels = torch.arange(x.shape[0], device=device) % 10
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sync(cuda)
    if start is not None:
        rate = args.batch * (args.steps - 5) / (time.perf_counter() - start)
        print(f"rank {rank}: {rate:,.0f} samples/s, final loss {loss.item():.3f}")
    print(f"rank {rank} placement:\n{numa.describe(numa.placement(), loc.node)}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
