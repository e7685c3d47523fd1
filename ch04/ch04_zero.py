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


def adamw_(master: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
           steps: torch.Tensor) -> None:
    """One AdamW step in a single fused kernel (PyTorch's ``fused=True`` path) on flat fp32 tensors."""
    steps += 1
    torch._fused_adamw_([master], [grad], [exp_avg], [exp_avg_sq], [], [steps], lr=1e-3, beta1=0.9,
                        beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)
