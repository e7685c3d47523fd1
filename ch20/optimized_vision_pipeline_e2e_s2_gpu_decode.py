"""Optimized vision pipeline, stage 2 of 3: the JPEGs decoded on the GPU by nvJPEG (technique from
ch05: gpu_jpeg_decode, measured there at 32x over PIL).

Baseline (baseline_vision_pipeline_e2e.py): PIL decode and fp32 normalize on the CPU, pageable copy.
Stage 1 copied uint8 pixels from pinned memory and normalized on the GPU; PIL still decoded ~1 ms
an image on one core.
Optimized: one batched ``torchvision.io.decode_jpeg([64 byte tensors], device="cuda")``: only the
encoded bytes (~1-2 MB, ~6x fewer than the pixels) cross PCIe and nvJPEG decodes the batch on the
GPU; the (3, H, W) uint8 images are stacked and normalized on the GPU as in stage 1. Skipped, with
the reason, where there is no CUDA device, no torchvision or no working nvJPEG.
Expect (measured, H200, 2026-11-27): 7.527 ms, 18.8x [15.7, 22.4] over the baseline, 11.2x over
stage 1, cv 0.014 (estimated ~3.5 ms: ~2.2 ms decode, ~1.3 ms for the TF32 net); decode-bound
(stage 3 halving the net's cost moved the call by 1%).
Run: python ch20/optimized_vision_pipeline_e2e_s2_gpu_decode.py  |  aisp bench run -t ch20:vision_pipeline_e2e
"""

from __future__ import annotations

import torch
from baseline_vision_pipeline_e2e import CpuPipeline
from ch20_vision import normalize

import aisp


class GpuDecodePipeline(CpuPipeline):
    def prepare(self) -> None:
        if self.device.type != "cuda":
            raise aisp.Unavailable("nvJPEG decode needs a CUDA device")
        try:
            from torchvision.io import decode_jpeg

            decode_jpeg(self.blobs[:1], device=self.device)
        except (ImportError, RuntimeError) as err:
            raise aisp.Unavailable(f"torchvision's GPU decode_jpeg is unavailable: {err}") from err

    def images(self) -> torch.Tensor:
        from torchvision.io import ImageReadMode, decode_jpeg

        decoded = decode_jpeg([self.blobs[i] for i in self.order.tolist()], mode=ImageReadMode.RGB,
                              device=self.device)
        return normalize(torch.stack(decoded))


def get_benchmark() -> aisp.Benchmark:
    return GpuDecodePipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
