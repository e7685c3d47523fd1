"""ZeRO's shard update as one Triton pass: two ranks' bf16 gradients averaged, AdamW on the fp32 master
weights and moments, the bf16 weights written. Per parameter it reads 16 bytes (master, m, v, two
bf16 gradients) and writes 14 (master, m, v, bf16 weight): 30 B, where the unfused step (a cast of
the reduced gradient to fp32, PyTorch's fused AdamW, a cast to bf16) moves 2 + 4 + 28 + 4 + 2 = 40 B
in three kernels. Imported only where Triton is installed; its CPU test runs it under TRITON_INTERPRET=1."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from ch04_zero import BETA1, BETA2, DECAY, EPS, LR

BLOCK = 2048
"""Parameters a program updates: 8 warps, 8 per thread (a 16-byte load of each bf16 gradient, two of
each fp32 tensor)."""
LOG2_BETAS: dict[torch.device, torch.Tensor] = {}
"""log2(beta1), log2(beta2) in fp64, per device."""


@triton.jit
def adamw_pair_kernel(master, exp_avg, exp_avg_sq, steps, own, peer, out, n, log2_betas, lr, beta1, beta2, decay,
                      eps, BLOCK: tl.constexpr):
    """PyTorch's fused AdamW update (``adam_math``, ADAMW mode) in fp32 with IEEE sqrt and division,
    on the gradient NCCL's bf16 ``ReduceOp.AVG`` gives for ``own`` and ``peer`` (mean, rounded to bf16).
    The bias corrections 1 - beta^step are computed in fp64, as PyTorch's are: in fp32, 1 - 0.999^1
    would keep ~4 significant digits. ``log2_betas``: log2(beta1), log2(beta2) in fp64 (a Python float
    argument would arrive as fp32)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(own + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(peer + offs, mask=mask, other=0.0).to(tl.float32)
    g = (g * 0.5).to(tl.bfloat16).to(tl.float32)
    p = tl.load(master + offs, mask=mask, other=0.0)
    m = tl.load(exp_avg + offs, mask=mask, other=0.0)
    v = tl.load(exp_avg_sq + offs, mask=mask, other=0.0)
    step = tl.load(steps).to(tl.float64)
    step_size = (lr / (1.0 - tl.exp2(step * tl.load(log2_betas)))).to(tl.float32)
    bias2_sqrt = tl.sqrt(1.0 - tl.exp2(step * tl.load(log2_betas + 1))).to(tl.float32)
    p = p - lr * decay * p
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    denom = tl.div_rn(tl.sqrt_rn(v), bias2_sqrt) + eps
    p = p - step_size * tl.div_rn(m, denom)
    tl.store(master + offs, p, mask=mask)
    tl.store(exp_avg + offs, m, mask=mask)
    tl.store(exp_avg_sq + offs, v, mask=mask)
    tl.store(out + offs, p.to(out.dtype.element_ty), mask=mask)


def adamw_pair_(master: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, steps: torch.Tensor,
                own: torch.Tensor, peer: torch.Tensor, out: torch.Tensor) -> None:
    """One AdamW step at ``steps`` (already counted) on a shard from two ranks' bf16 gradients of it,
    its bf16 weights into ``out``: ``ch04_zero.adamw_pair_reference`` in one kernel. Flat, contiguous,
    all of one length."""
    n = master.numel()
    for t in (exp_avg, exp_avg_sq, own, peer, out):
        assert t.numel() == n and t.is_contiguous() and t.device == master.device, "flat shards of one length"
    assert master.dtype == exp_avg.dtype == exp_avg_sq.dtype == torch.float32 and own.dtype == peer.dtype == torch.bfloat16
    if master.device not in LOG2_BETAS:  # made once, before any CUDA graph captures the kernel
        LOG2_BETAS[master.device] = torch.tensor([math.log2(BETA1), math.log2(BETA2)], dtype=torch.float64,
                                                 device=master.device)
    adamw_pair_kernel[(triton.cdiv(n, BLOCK),)](
        master, exp_avg, exp_avg_sq, steps, own, peer, out, n, LOG2_BETAS[master.device], LR, BETA1, BETA2,
        DECAY, EPS, BLOCK=BLOCK, num_warps=8)
