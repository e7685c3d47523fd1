"""Linear layers with e4m3 weights for decode, over :mod:`aisp.kits.fp8`'s weight-only kernel (chapter
16's ``fp8_weight_decode``, chapter 20's ``llm_inference_e2e`` fp8 stage).

A separate module, importing the kernel's (and so Triton) only when a layer is built, so that the
pair files that use it import without Triton.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

DECODE_ROWS = 16
"""Most rows the weight-only fp8 kernel takes (one mma row block: ``aisp.kits.fp8.BLOCK_M``)."""


class FP8Linear(nn.Module):
    """``linear``'s weight (no bias) as e4m3 bits (uint8) and a scale per output channel. A call runs the
    weight-only fp8 kernel on its rows cast to fp16. With ``widen_prefill``, a call of more than
    :data:`DECODE_ROWS` rows (a prefill: compute-bound) or on a CPU instead widens the weights to
    x's dtype in one pass, runs one GEMM and scales its output."""

    def __init__(self, linear: nn.Linear, widen_prefill: bool = False) -> None:
        from aisp.kits.fp8 import quantize_rows

        super().__init__()
        w8, scale = quantize_rows(linear.weight)
        self.register_buffer("w8", w8)
        self.register_buffer("scale", scale)
        self.widen_prefill = widen_prefill

    @property
    def weight(self) -> torch.Tensor:
        """The e4m3 bits (the kit's loops read ``head.weight.device``)."""
        return self.w8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if self.widen_prefill and not (x.is_cuda and len(rows) <= DECODE_ROWS):
            y = F.linear(rows, self.w8.view(torch.float8_e4m3fn).to(x.dtype)) * self.scale.to(x.dtype)
        else:
            from aisp.kits.fp8 import fp8_linear

            y = fp8_linear(rows.to(torch.float16).contiguous(), self.w8.view(torch.float8_e4m3fn), self.scale,
                           False, x.dtype)
        return y.view(*x.shape[:-1], -1)


def to_fp8(module: nn.Module, widen_prefill: bool = False, layer: type[FP8Linear] = FP8Linear) -> None:
    """Replaces every ``nn.Linear`` under ``module`` by a ``layer`` (:class:`FP8Linear` or a subclass
    with another kernel; the bf16 weights are freed)."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, layer(child, widen_prefill))
        else:
            to_fp8(child, widen_prefill, layer)
