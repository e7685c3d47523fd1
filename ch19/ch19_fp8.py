"""FP8 training pieces chapter 19 shares: per-tensor scaling (dynamic or delayed) and a Linear whose
forward and backward run as three ``torch._scaled_mm`` calls.

Formats: activations and weights in e4m3 (3 mantissa bits, largest finite 448), gradients in e5m2
(2 mantissa bits, range to 57,344: gradients span more decades). A tensor is scaled so that its
largest |value| lands on the format's largest finite value; ``_scaled_mm`` takes the inverse
(dequantization) scales and applies them in its epilogue, accumulating in fp32.

``_scaled_mm(a, b, ...)`` wants ``a`` row-major and ``b`` column-major, every dimension a multiple of
16. For ``y = x w^T`` with x (M, K) and w (N, K) that means: forward ``x8 @ w8.t()``; grad_x =
``g8 @ (w^T)8.t()``; grad_w = ``(g^T)8 @ (x^T)8.t()``: each operand is needed in both layouts,
which is why the quantizer writes q and q^T in one pass (:mod:`ch19_cast`).

On a GPU the cast is the Triton kernel; on a CPU (tests, the loss-curve tool) the same arithmetic
in torch, so the logic is checked without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FP8_MAX = {E4M3: torch.finfo(E4M3).max, E5M2: torch.finfo(E5M2).max}


@dataclass(frozen=True)
class Fp8Operand:
    """A quantized tensor in both layouts and its fp32 dequantization scale."""

    q: torch.Tensor
    qt: torch.Tensor
    scale: torch.Tensor


def amax(t: torch.Tensor) -> torch.Tensor:
    """max |t| as one fp32 value: one reduction pass over t (in t's dtype: the max of bf16 values is
    exact in bf16, and asking for an fp32 result could cost a converted copy of t)."""
    return torch.linalg.vector_norm(t, ord=float("inf")).float().reshape(1)


def cast_transpose(t: torch.Tensor, history: torch.Tensor, dtype: torch.dtype,
                   amax_out: torch.Tensor, persistent: bool = False) -> Fp8Operand:
    """Quantize 2-D ``t`` with scale ``fp8_max / max(history)``; max |t| lands in ``amax_out``.
    On a GPU: ch19_cast's kernel, its persistent one if ``persistent``."""
    if t.is_cuda:
        import ch19_cast
        fused = ch19_cast.cast_transpose_persistent if persistent else ch19_cast.cast_transpose
        q, qt, scale = fused(t, history, dtype, FP8_MAX[dtype], amax_out)
        return Fp8Operand(q, qt, scale)
    top = history.max().clamp_min(1e-12)
    q = (t.float() * (FP8_MAX[dtype] / top)).clamp(-FP8_MAX[dtype], FP8_MAX[dtype]).to(dtype)
    amax_out.copy_(torch.maximum(amax_out, amax(t)))
    return Fp8Operand(q, q.t().contiguous(), top / FP8_MAX[dtype])


class DynamicScaling:
    """Scale each tensor by its own amax, measured in a pass of its own just before the cast."""

    def __call__(self, key: str, t: torch.Tensor, dtype: torch.dtype) -> Fp8Operand:
        current = amax(t)
        return cast_transpose(t, current, dtype, torch.zeros_like(current))


class DelayedScaling:
    """Scale each tensor by the largest amax of its last ``len`` casts (Transformer Engine's recipe):
    the scale is known before the tensor is read, so the amax of this cast is taken in the same pass
    and recorded for the next ones. ``history`` maps a tensor's key to its (len,) fp32 amaxes."""

    def __init__(self, history: dict[str, torch.Tensor], length: int = 16, persistent: bool = False) -> None:
        self.history, self.length, self.calls, self.persistent = history, length, 0, persistent

    def __call__(self, key: str, t: torch.Tensor, dtype: torch.dtype) -> Fp8Operand:
        if key not in self.history:
            self.history[key] = amax(t).repeat(self.length)
        hist = self.history[key]
        slot = hist[self.calls % self.length:][:1]
        latest = torch.zeros_like(slot)
        out = cast_transpose(t, hist, dtype, latest, self.persistent)
        slot.copy_(latest)
        return out

    def step(self) -> None:
        """Advance to the next history slot (once per training step)."""
        self.calls += 1


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              fast_accum: bool) -> torch.Tensor:
    """bf16 ``a @ b`` of fp8 operands (a row-major, b column-major) and their dequant scales."""
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                            use_fast_accum=fast_accum)


class Fp8LinearFunction(torch.autograd.Function):
    """y = x w^T with e4m3 x and w; backward with e5m2 gradients. Fast accumulation in the forward
    only (the backward's long reductions keep full fp32 accumulation), as torchao does."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, quant: DynamicScaling | DelayedScaling) -> torch.Tensor:
        xq, wq = quant("x", x, E4M3), quant("w", w, E4M3)
        ctx.save_for_backward(xq.qt, xq.scale, wq.qt, wq.scale)
        ctx.quant = quant
        return scaled_mm(xq.q, wq.q.t(), xq.scale, wq.scale, fast_accum=True)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        xqt, x_scale, wqt, w_scale = ctx.saved_tensors
        gq = ctx.quant("g", g.contiguous(), E5M2)
        grad_x = scaled_mm(gq.q, wqt.t(), gq.scale, w_scale, fast_accum=False)
        grad_w = scaled_mm(gq.qt, xqt.t(), gq.scale, x_scale, fast_accum=False)
        return grad_x, grad_w, None


def fp8_linear(x: torch.Tensor, w: torch.Tensor, quant: DynamicScaling | DelayedScaling) -> torch.Tensor:
    """``F.linear(x, w)`` (2-D x, no bias) through fp8 tensor cores, differentiable."""
    return Fp8LinearFunction.apply(x, w, quant)
