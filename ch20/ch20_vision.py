"""What the ``vision_pipeline_e2e`` case study's stages share: the workload, a pool of seeded synthetic
JPEGs (encoded at setup, no downloads), the ImageNet normalization, and a ResNet-18-shaped conv net
(batch norm folded into conv biases, as at inference) whose pooled features are standardized per
image, so the output has RMS 1 at any size.

The JPEG pool is chapter 5's (gpu_jpeg_decode) recipe, copied in small (chapters do not import each
other): low-frequency colour fields plus fine noise, quality 90, 4:4:4 (no chroma upsampling, so
two decoders differ only by IDCT/colour rounding).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import aisp

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
"""ImageNet channel statistics (the usual ``Normalize``)."""


@dataclass(frozen=True, kw_only=True)
class VisionWorkload(aisp.Workload):
    pool: int = 64
    """Distinct JPEG files the batches draw from."""
    batch: int = 64
    size: int = 224
    quality: int = 90
    width: int = 64
    """Channels of the first stage (doubling over four stages, as in ResNet-18)."""


def net_flops(w: VisionWorkload) -> float:
    """Multiply-adds x 2 of :class:`ResNetish` on one batch (stem, 8 basic blocks, 3 projections)."""
    side, macs = w.size // 2, 3 * w.width * 49 * (w.size // 2) ** 2
    side //= 2
    c_in = w.width
    for stage in range(4):
        c = w.width * 2 ** stage
        if stage:
            side = (side + 1) // 2
            macs += c_in * c * side * side  # 1x1 projection
        macs += (c_in * c + 3 * c * c) * 9 * side * side  # two blocks of two 3x3 convs
        c_in = c
    return 2.0 * macs * w.batch


def vision_workload(requires: aisp.Requirements, **kw: object) -> VisionWorkload:
    w = VisionWorkload(**kw)
    return VisionWorkload(**kw, flops=net_flops(w), bytes=float(w.batch * w.size * w.size * 3), link="h2d",
                          items=w.batch, item_unit="images", precision="bf16", element_tol=0.05, rtol=0.05,
                          max_rel_l2=0.05, requires=requires)


def encode_pool(w: VisionWorkload, seed: int) -> list[torch.Tensor]:
    """``w.pool`` smooth synthetic photos as JPEG bytes (uint8 CPU tensors)."""
    from PIL import Image

    gen = torch.Generator().manual_seed(seed)
    coarse = torch.rand(w.pool, 3, 12, 12, generator=gen)
    fields = F.interpolate(coarse, size=(w.size, w.size), mode="bicubic", align_corners=False)
    noisy = (fields + 0.03 * torch.randn(fields.shape, generator=gen)).clamp(0, 1)
    pixels = (noisy * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
    blobs = []
    for img in pixels:
        buf = io.BytesIO()
        Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=w.quality, subsampling=0)
        blobs.append(torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8))
    return blobs


def normalize(pixels: torch.Tensor) -> torch.Tensor:
    """(N, 3, H, W) uint8 (any strides) -> fp32 NCHW, (x / 255 - mean) / std, on its device."""
    mean = torch.tensor(MEAN, device=pixels.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=pixels.device).view(1, 3, 1, 1)
    return ((pixels.float() / 255 - mean) / std).contiguous()


class Block(nn.Module):
    """A basic residual block: relu(x + conv(relu(conv(x)))), a strided 1x1 projection on the skip."""

    def __init__(self, c_in: int, c: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c, 3, stride, 1)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1)
        self.skip = nn.Conv2d(c_in, c, 1, stride) if stride > 1 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.skip(x) + self.conv2(F.relu(self.conv1(x))))


class ResNetish(nn.Module):
    """ResNet-18's shape without batch norm; returns per-image standardized pooled features (N, 8 width)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 7, 2, 3)
        blocks, c_in = [], width
        for stage in range(4):
            c = width * 2 ** stage
            blocks += [Block(c_in, c, 2 if stage else 1), Block(c, c, 1)]
            c_in = c
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        f = self.blocks(x).float().mean(dim=(2, 3))
        return (f - f.mean(dim=1, keepdim=True)) / f.std(dim=1, keepdim=True)


def build_net(w: VisionWorkload, seed: int, device: torch.device) -> ResNetish:
    """Seeded He-normal weights (the second conv of a block scaled by 0.5), small biases; fp32."""
    gen = torch.Generator().manual_seed(seed + 7)
    net = ResNetish(w.width)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.dim() == 1:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                gain = 0.5 if "conv2" in name else 1.0
                p.copy_(gain * torch.randn(p.shape, generator=gen) * (2.0 / p[0].numel()) ** 0.5)
    return net.to(device).eval()
