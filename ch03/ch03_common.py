"""Shared by the chapter's loader pairs (numa_unaware, docker): a synthetic image dataset and a
pipeline that feeds its batches through pinned staging buffers to the device."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

import aisp


@dataclass(frozen=True, kw_only=True)
class LoaderWorkload(aisp.Workload):
    samples: int = 2048
    """Samples per run() (one epoch)."""
    batch: int = 64
    side: int = 128
    """Each sample decodes to a 3 x side x side float32 image (192 KiB; a batch is 12 MiB)."""
    workers: int = max(2, min(8, (os.cpu_count() or 2) - 1))
    """DataLoader worker processes (the numa_unaware pair and the docker pair's optimized side)."""
    prefetch: int = 4


NO_INPUTS = ("one run() is an epoch whose DataLoader workers decode every sample from (seed, index) inside "
             "the call: that decoding is the work timed, so no tensor holds the inputs before it")
"""Why the loader pairs declare no per-call ``inputs`` (their results read ``ok-unchecked``)."""


def loader_workload(**sizes: Any) -> LoaderWorkload:
    w = LoaderWorkload(**sizes)
    image = 3 * w.side * w.side * 4
    # bytes: each decoded sample written once into host memory (its batch) and read once on its way to
    # the device, at the host's memory copy rate (read + write counted, as aisp peak counts a copy).
    return LoaderWorkload(**sizes, bytes=2.0 * w.samples * image, link="host_memory", items=w.samples,
                          item_unit="samples", precision="fp32", no_inputs_reason=NO_INPUTS)


def batch_bytes(w: LoaderWorkload) -> int:
    return w.batch * 3 * w.side * w.side * 4


class SyntheticImages(Dataset):
    """Sample i is decoded from (seed, i): random uint8 pixels, blurred and normalized (CPU work)."""

    def __init__(self, side: int, count: int, seed: int) -> None:
        self.side, self.count, self.seed = side, count, seed

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        raw = torch.randint(0, 256, (3, self.side + 2, self.side + 2), generator=gen, dtype=torch.uint8)
        img = raw.float().div_(255.0)
        img = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
        img = (img[:, :, :-2] + img[:, :, 1:-1] + img[:, :, 2:]) / 3
        return (img - 0.5) / 0.29


class LoaderPipeline(aisp.Benchmark):
    """One epoch: workers decode batches; the main thread copies each into one of two pinned staging
    buffers, sends it to the device with a non-blocking copy and reduces it there (per-sample mean).

    Subclasses choose the worker count and prefetch depth, the workers' ``worker_init_fn``, the
    placement of the staging buffers and of the main thread during run().
    """

    scratch = ("staging", "dev", "out")
    inputs = ()  # the workers decode each sample inside run(): see NO_INPUTS
    workers = 2
    prefetch = 2

    def worker_init(self) -> Any:
        return None

    def placement(self) -> AbstractContextManager[Any]:
        """Held around run() (and around the staging allocation in setup)."""
        return nullcontext()

    def setup(self) -> None:
        w = self.workload
        cuda = self.device.type == "cuda"
        self.loader = DataLoader(SyntheticImages(w.side, w.samples, self.seed), batch_size=w.batch,
                                 num_workers=self.workers, prefetch_factor=self.prefetch, persistent_workers=True,
                                 worker_init_fn=self.worker_init())
        shape = (w.batch, 3, w.side, w.side)
        with self.placement():
            self.staging = [torch.zeros(shape, pin_memory=cuda) for _ in range(2)]
        self.copied = [torch.cuda.Event() if cuda else None for _ in range(2)]
        self.dev = torch.empty(shape, device=self.device)
        self.out = torch.empty(w.samples, device=self.device)

    def run(self) -> torch.Tensor:
        with self.placement():
            return self._epoch()

    def _epoch(self) -> torch.Tensor:
        b = self.workload.batch
        for i, batch in enumerate(self.loader):
            k = i % 2
            if self.copied[k] is not None:
                self.copied[k].synchronize()  # the copy that last read this staging buffer is done
            self.staging[k].copy_(batch)
            self.dev.copy_(self.staging[k], non_blocking=True)
            if self.copied[k] is not None:
                self.copied[k].record()
            self.out[i * b:(i + 1) * b] = self.dev.mean(dim=(1, 2, 3))
        return self.out

    def teardown(self) -> None:
        self.loader = None
