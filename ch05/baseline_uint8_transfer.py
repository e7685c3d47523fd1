"""Baseline uint8 transfer: normalize a batch of images to fp32 on the CPU, copy 4 bytes a pixel.

Baseline: 256 decoded RGB images (224 x 224, uint8, HWC, in pinned memory: the per-call input
``images``) are converted the way CPU transforms do (ToTensor + Normalize): to fp32 CHW, / 255,
minus the channel mean, divided by the channel std, written into a preallocated pinned fp32
buffer; then one ``non_blocking`` copy of 154 MB to the GPU. The host pays three passes over
38.5 M values and the link carries 4 bytes per pixel value.
Optimized (optimized_uint8_transfer.py): copy the 38.5 MB of uint8 as they are (1 byte a value,
a quarter of the bytes) and do the same conversion on the GPU, where it is a few microseconds of
HBM traffic. Same formula, same order of operations: fp32 results equal to rounding.
Expect (measured, H200, 2026-11-23): 25.72 -> 1.101 ms, 23.2x [22.1, 24.4]. The baseline is host-
bound (its 154 MB need 2.8 ms of PCIe; the rest is the CPU's normalize); the optimized moves the
uint8 bytes at 35.0 GB/s, 64% of pinned H2D (bytes below are the uint8 bytes, so the roofline shows
the optimized copy against the 55 GB/s ceiling).
Run: python ch05/baseline_uint8_transfer.py  |  aisp bench run -t ch05:uint8_transfer
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class ImageBatch(aisp.Workload):
    batch: int = 256
    size: int = 224
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)


WORKLOAD = ImageBatch(bytes=256 * 224 * 224 * 3, link="h2d", items=256, item_unit="images", precision="fp32",
                      ceiling_note="profiled (torch profiler, H200): GPU busy 92% of a 1.18 ms window: the 38.5 MB H2D copy 698 us (55 GB/s), then 3 normalize kernels 387 us",
                      requires=aisp.Requirements(cuda=True),
                      window="idle")


def normalize(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) fp32: (x / 255 - mean) / std, written into ``out``."""
    torch.div(images.permute(0, 3, 1, 2), 255.0, out=out)
    return out.sub_(mean).div_(std)


class CpuNormalize(aisp.Benchmark):
    """Normalizes on the host, then copies fp32 to the GPU."""

    workload = WORKLOAD
    inputs = ("images",)
    scratch = ("staging", "out")

    def setup(self) -> None:
        w = self.workload
        gen = torch.Generator().manual_seed(self.seed)
        self.images = torch.randint(0, 256, (w.batch, w.size, w.size, 3), dtype=torch.uint8,
                                    generator=gen).pin_memory()
        self.out = torch.empty(w.batch, 3, w.size, w.size, device=self.device)
        self.prepare()

    def channel(self, values: tuple[float, ...], device: torch.device) -> torch.Tensor:
        return torch.tensor(values, device=device).view(3, 1, 1)

    def prepare(self) -> None:
        self.mean, self.std = (self.channel(v, torch.device("cpu")) for v in (self.workload.mean, self.workload.std))
        self.staging = torch.empty(self.out.shape, pin_memory=True)

    def run(self) -> torch.Tensor:
        normalize(self.images, self.mean, self.std, self.staging)
        return self.out.copy_(self.staging, non_blocking=True)


def get_benchmark() -> aisp.Benchmark:
    return CpuNormalize()


if __name__ == "__main__":
    aisp.main(get_benchmark)
