"""ZeRO's pieces: the workload and one fused AdamW update on flat fp32 tensors."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch04_common import TWO_RANKS

import aisp


@dataclass(frozen=True, kw_only=True)
class ZeroWorkload(aisp.Workload):
    params: int = 128 * 2**20
    """Parameters (a multiple of the world size)."""
    headline: str = "memory"
    precision: str = "bf16"
    requires: aisp.Requirements = TWO_RANKS
    timeout_s: float = 240.0


LR, BETA1, BETA2, DECAY, EPS = 1e-3, 0.9, 0.999, 0.01, 1e-8
"""The AdamW hyperparameters every variant uses."""


def adamw_(master: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
           steps: torch.Tensor) -> None:
    """One AdamW step in a single fused kernel (PyTorch's ``fused=True`` path) on flat fp32 tensors."""
    steps += 1
    fused_adamw_(master, grad, exp_avg, exp_avg_sq, steps)


def fused_adamw_(master: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                 steps: torch.Tensor) -> None:
    """PyTorch's fused AdamW at step ``steps`` (already counted: the optimizer adds 1 before it)."""
    torch._fused_adamw_([master], [grad], [exp_avg], [exp_avg_sq], [], [steps], lr=LR, beta1=BETA1,
                        beta2=BETA2, weight_decay=DECAY, eps=EPS, amsgrad=False, maximize=False)


def mean_of_two(own: torch.Tensor, peer: torch.Tensor) -> torch.Tensor:
    """The fp32 mean of two ranks' bf16 gradients, rounded to bf16 as NCCL's bf16 ``ReduceOp.AVG``
    returns it (each halved, exactly, then summed in fp32 and rounded), back in fp32."""
    return own.float().add_(peer.float()).mul_(0.5).bfloat16().float()


def adamw_pair_reference(master: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                         steps: torch.Tensor, own: torch.Tensor, peer: torch.Tensor, out: torch.Tensor) -> None:
    """What ``ch04_zero_triton.adamw_pair_`` does in one pass, in PyTorch ops: average two ranks' bf16
    gradients of a shard, one AdamW step at ``steps`` on its fp32 state, the bf16 weights into ``out``."""
    fused_adamw_(master, mean_of_two(own, peer), exp_avg, exp_avg_sq, steps)
    out.copy_(master)
