"""Optimized input pipeline: parallel workers, pinned memory, async copies, prefetching.

Baseline (baseline_dataloader_default.py): the main process prepares each batch, copies it from
pageable memory, then computes: CPU and GPU take turns.
Optimized: ``num_workers`` processes prepare batches concurrently (each with one intra-op
thread), ``pin_memory=True`` has a pin thread stage batches in page-locked memory so the
host-to-device copy is a direct DMA (55 vs 21 GB/s measured on our H200 host) that
``non_blocking=True`` overlaps with compute, ``persistent_workers=True`` keeps workers alive
across epochs (no process start-up per run) and ``prefetch_factor`` keeps batches in flight.
Same dataset, same order (no shuffling), same model.
Expect: about 3-6x with 8 workers on a 16-core host; the gain tracks the spare CPU cores.
Measured on our H200 host: 3.11x.
Run: python ch13/optimized_dataloader_default.py  |  aisp bench run -t ch13:dataloader_default
"""

from __future__ import annotations

import torch
from baseline_dataloader_default import DefaultLoader, SyntheticImages
from torch.utils.data import DataLoader

import aisp


class TunedLoader(DefaultLoader):
    def make_loader(self, data: SyntheticImages) -> DataLoader:
        w = self.workload
        return DataLoader(data, batch_size=w.batch, num_workers=w.workers,
                          pin_memory=self.device.type == "cuda", persistent_workers=True,
                          prefetch_factor=w.prefetch, worker_init_fn=_one_thread)

    def to_device(self, images: torch.Tensor) -> torch.Tensor:
        return images.to(self.device, non_blocking=True)


def _one_thread(_: int) -> None:
    torch.set_num_threads(1)


def get_benchmark() -> aisp.Benchmark:
    return TunedLoader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
