"""Baseline performance basics: a naive training loop that spends much of its time not computing.

Baseline: an MLP (256-1024-256, fp32) trains on 2,048 samples, one SGD step per 256 samples,
in micro-batches of 32 with gradient accumulation. Every micro-batch slices pageable host
memory and copies it with ``.to(device)`` (a blocking copy that drains the GPU's queue), the
copy and every operator allocate fresh tensors, and every micro-batch launches its own ~20
small kernels through Python and autograd. ``metrics()`` reports goodput: the time the GPU
spends in the loop's kernels (forward, backward, SGD) over the loop's wall time.
Optimized: optimized_performance_{pinned,batch,prealloc,graphs,combined}.py remove one
overhead each (pinned + non_blocking copies, 256-row batches, reused buffers, CUDA graphs);
the combined one removes them all. Same samples, same initial weights, same updates.
Expect: on an H200, batch 5.5-6x, graphs 7-7.5x, combined 30-50x (the eager baseline varies
with the host); pinned and prealloc 1.0-1.06x, within noise: the micro-batches are 32 KiB, and
their copies and allocations are a small part of a loop whose time goes to the host driving
eager autograd (~0.8 ms per micro-batch). Baseline goodput ~7%, combined ~70%.
Ceiling: the loop's 5.37 GFLOP (forward 2, weight gradients 2, the hidden layer's input gradient 2
FLOPs a MAC; x needs no gradient) at the fp32 matmul peak, 0.105 ms on an H200.
Run: python ch01/baseline_performance.py  |  aisp bench run -t ch01:performance
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from ch01_common import kernel_seconds, seconds
from torch import nn

import aisp

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class TrainWorkload(aisp.Workload):
    samples: int = 2048
    d_in: int = 256
    hidden: int = 1024
    d_out: int = 256
    step_samples: int = 256
    """Samples per SGD step (one batch of 256, or 8 accumulated micro-batches of 32)."""
    micro_batch: int = 32
    lr: float = 0.05


def _train_workload() -> TrainWorkload:
    shape = TrainWorkload()
    params = shape.d_in * shape.hidden + shape.hidden * shape.d_out
    steps = shape.samples // shape.step_samples
    data = shape.samples * (shape.d_in + shape.d_out)
    # Forward 2 FLOPs per MAC; backward 2 for every weight gradient and 2 for the input gradient of the
    # second layer only (the batch x needs none): 2 x 2,048 x (2 x 256 x 1,024 + 3 x 1,024 x 256) = 5.37 GFLOP.
    # Fewest bytes: the data once, weights read+written per step.
    macs1, macs2 = shape.d_in * shape.hidden, shape.hidden * shape.d_out
    return TrainWorkload(flops=2.0 * shape.samples * (2 * macs1 + 3 * macs2), bytes=4.0 * (data + 2 * steps * params),
                         items=shape.samples, item_unit="samples", precision="fp32",
                         ceiling_note="profiled (torch profiler, H200): GPU busy 64% of a 1.50 ms window; 220 kernels a call, 96% under 10 us; FFMA GEMMs 51% of the 0.83 ms of kernels",
                         window="idle")


WORKLOAD = _train_workload()
CUDA_WORKLOAD = dataclasses.replace(WORKLOAD, requires=aisp.Requirements(cuda=True))
"""The same workload for variants that need a GPU (pinned memory, CUDA graphs)."""


class TrainingLoop(aisp.Benchmark):
    """Trains from the initial weights over all samples; returns the final weights."""

    workload = WORKLOAD
    inputs = ("x_host", "y_host")
    scratch = ("model",)
    micro = WORKLOAD.micro_batch
    pin = False
    grads_to_none = True

    def setup(self) -> None:
        w = self.workload
        gen = torch.Generator().manual_seed(self.seed)
        self.x_host = torch.randn(w.samples, w.d_in, generator=gen)
        self.y_host = torch.randn(w.samples, w.d_out, generator=gen)
        if self.pin:
            self.x_host, self.y_host = self.x_host.pin_memory(), self.y_host.pin_memory()
        self.model = nn.Sequential(nn.Linear(w.d_in, w.hidden), nn.ReLU(), nn.Linear(w.hidden, w.d_out))
        self.init = [torch.randn(p.shape, generator=gen).mul_(0.5 / p.shape[-1] ** 0.5).to(self.device)
                     for p in self.model.parameters()]
        self.model.to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=w.lr)

    def fetch(self, lo: int) -> Batch:
        """Micro-batch ``lo`` on the device, freshly allocated: a blocking copy unless ``pin``."""
        rows = slice(lo, lo + self.micro)
        return (self.x_host[rows].to(self.device, non_blocking=self.pin),
                self.y_host[rows].to(self.device, non_blocking=self.pin))

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Accumulates this micro-batch's share of the step's mean-squared-error gradient."""
        share = self.micro / self.workload.step_samples
        (nn.functional.mse_loss(self.model(x), y) * share).backward()

    def update(self) -> None:
        self.opt.step()
        self.opt.zero_grad(set_to_none=self.grads_to_none)

    def reset(self) -> None:
        with torch.no_grad():
            for p, p0 in zip(self.model.parameters(), self.init, strict=True):
                p.copy_(p0)
        self.opt.zero_grad(set_to_none=self.grads_to_none)

    def run(self) -> tuple[torch.Tensor, ...]:
        w = self.workload
        self.reset()
        for lo in range(0, w.samples, w.step_samples):
            for mlo in range(lo, lo + w.step_samples, self.micro):
                self.forward_backward(*self.fetch(mlo))
            self.update()
        return tuple(p.detach() for p in self.model.parameters())

    def metrics(self) -> dict[str, float]:
        """Goodput: the time the GPU spends in the loop's kernels (profiler; copies, memsets and
        idle gaps excluded) over the loop's wall time. None on a CPU, which computes in the loop
        itself and has no transfers to wait for."""
        if self.device.type != "cuda":
            return {}
        loop = seconds(self.run, self.device)
        useful = kernel_seconds(self.run, self.device)
        return {"goodput": useful / loop, "kernel_ms": useful * 1e3, "loop_ms": loop * 1e3}

def get_benchmark() -> aisp.Benchmark:
    return TrainingLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
