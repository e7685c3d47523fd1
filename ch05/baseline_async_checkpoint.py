"""Baseline async checkpoint: four training steps, then a blocking ``torch.save`` of the model.

Baseline: a 4-layer MLP (hidden 2,048, fp32: 64 MiB of weights) trains 4 SGD steps on the
per-call batch ``x``, then checkpoints the way most training scripts do: ``torch.save`` of the
state dict to a temp file, fsync, atomic rename. The step waits for all of it: the device-to-host
copy (pageable, tensor by tensor), serialization, and the disk write.
Optimized (optimized_async_checkpoint.py): the state dict is copied into preallocated pinned host
tensors (one DMA burst at ~55 GB/s, ~1.2 ms for 64 MiB) and a background thread writes that
snapshot (same ``torch.save`` + fsync + rename) while the next steps run; a step only waits if the
previous write has not finished (the same contract as ``torch.distributed.checkpoint.async_save``).
Both write the same checkpoint file; both return the 4 losses. On a CPU the batch is 8 rows (a
GPU step's 4,096 would take seconds there).
Ceiling: the disk's sequential write (``disk_write`` from disk_ceiling.py, fsync included):
``checkpoint_gbps`` / ``pct_of_disk_write`` in the metrics are the checkpoint's own write rate.
Expect (measured, H200, 2026-11-23): 140.7 -> 53.7 ms, 2.73x [2.60, 2.86]; the baseline is ~134 ms
of write (0.50 GB/s, 41% of disk_write). The optimized's own write takes about as long; the
harness's interleaved baseline call hides the wait for it, so back-to-back checkpoints would be
write-bound (README, example 6).
Run: python ch05/baseline_async_checkpoint.py  |  aisp bench run -t ch05:async_checkpoint
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from ch05_io import DISK_WRITE, RateLog, remove, scratch_dir

import aisp


@dataclass(frozen=True, kw_only=True)
class CheckpointWorkload(aisp.Workload):
    hidden: int = 2048
    """Width of each square layer: 4 x 2048^2 fp32 = 64 MiB of state."""
    layers: int = 4
    batch: int = 4096
    """Rows per step on a GPU."""
    cpu_batch: int = 8
    """Rows per step on a CPU."""
    steps: int = 4
    """Training steps per run(); one checkpoint at the end."""


WORKLOAD = CheckpointWorkload(items=4, item_unit="steps", precision="fp32")
"""No FLOPs declared: the bound is max(steps, disk write), not a roofline; the batch differs per device."""


def save_checkpoint(state: dict[str, torch.Tensor], path: Path) -> None:
    """``torch.save`` to a temp file, fsync, rename: a crash never leaves a torn checkpoint."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointedTraining(aisp.Benchmark):
    """``steps`` SGD steps of an MLP, then a checkpoint of its weights; returns the losses."""

    workload = WORKLOAD
    inputs = ("x",)
    state = ("model",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        rows = w.batch if self.device.type == "cuda" else w.cpu_batch
        torch.manual_seed(self.seed)
        layers = [m for _ in range(w.layers) for m in (torch.nn.Linear(w.hidden, w.hidden, bias=False),
                                                       torch.nn.ReLU())]
        self.model = torch.nn.Sequential(*layers[:-1]).to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(rows, w.hidden, device=self.device, generator=gen)
        self.target = torch.randn(rows, w.hidden, device=self.device, generator=gen)
        self.folder = scratch_dir("ckpt")
        self.path = self.folder / "model.pt"
        self.saves = RateLog(4.0 * w.hidden * w.hidden * w.layers)

    def train(self) -> torch.Tensor:
        losses = []
        for _ in range(self.workload.steps):
            loss = torch.nn.functional.mse_loss(self.model(self.x), self.target)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            losses.append(loss.detach())
        return torch.stack(losses)

    def save(self, state: dict[str, torch.Tensor]) -> None:
        self.saves.start()
        save_checkpoint(state, self.path)
        self.saves.stop()

    def run(self) -> torch.Tensor:
        losses = self.train()
        self.save(self.model.state_dict())
        return losses

    def metrics(self) -> dict[str, float]:
        found = self.saves.metrics(DISK_WRITE)
        return {k.replace("achieved", "checkpoint"): v for k, v in found.items()}

    def teardown(self) -> None:
        remove(self.folder)


def get_benchmark() -> aisp.Benchmark:
    return CheckpointedTraining()


if __name__ == "__main__":
    aisp.main(get_benchmark)
