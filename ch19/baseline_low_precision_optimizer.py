"""Baseline optimizer memory: Adam training of a 268M-parameter MLP with fp32 weights and states.

Baseline: mixed precision as most training scripts write it: fp32 parameters, ``torch.autocast``
bf16 for the GEMMs, fp32 gradients and ``torch.optim.Adam(fused=True)`` with fp32 moments. Bytes
held per parameter: 4 (weight) + 4 (gradient) + 8 (two moments) + 2 (autocast's bf16 weight copy
during the step) + 4 (the start snapshot every run() restores, so each call does the same work).
Optimized (optimized_low_precision_optimizer.py): bf16 parameters and gradients, an fp32 master
copy, bf16 moments: 2 + 2 + 4 + 4 (+ 4 snapshot) bytes per parameter.
Headline: peak memory (baseline / optimized). Expect (measured, H200, 2026-11-27): 5.45 GB -> 4.36 GB peak,
1.25x [1.25, 1.25] (20.3 vs 16.3 bytes per parameter, snapshot and activations included); the two
steps also run faster, 13.69 -> 9.34 ms (first run, same code: 13.71 -> 11.97 ms).
Tolerance: bf16, element_tol 2^-6 (twice the default). The GEMMs see the same bf16 weights on both
sides (autocast rounds the fp32 weights as the optimized stores them); the first update differs only
by the bf16 rounding of the moments (relative 2^-9). Outputs: the loss of each step and the last
step's predictions, which carry the first step's update through the MLP's layers: on refilled inputs
(H200, 2026-11-28) 221 of 2,097,152 predictions were off by up to 1.15x the default element bound
(1.1% of max|r|), rounding accumulated over depth; relative L2 stays at the default.
Run: python ch19/baseline_low_precision_optimizer.py  |  aisp bench run -t ch19:low_precision_optimizer
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import aisp


@dataclass(frozen=True, kw_only=True)
class OptimizerWorkload(aisp.Workload):
    dim: int = 2048
    layers: int = 8
    tokens: int = 1024
    steps: int = 2
    lr: float = 1e-3


def least_resident_bytes(w: OptimizerWorkload) -> int:
    """The fewest bytes any correct design of this run() holds on the GPU at once: at its end, the
    state every variant keeps, each at the narrowest width a variant keeps it in: each weight in fp32
    (the baseline's parameters, the optimized's master copy) and Adam's two moments in bf16 (the
    optimized's); with the fp32 inputs and the output (fp32 losses, bf16 predictions).
    A floor: gradients are left out (an update fused into backward frees each as it is made), as are
    activations, the bf16 weights the GEMMs read (cast a layer at a time) and the start snapshot
    (read once at the call's start, unlike the state every step uses: the host could hold it)."""
    params = w.layers * 8 * w.dim ** 2
    return params * (4 + 2 * 2) + 2 * 4 * w.tokens * w.dim + 4 * w.steps + 2 * w.tokens * w.dim


def optimizer_workload(**kw: object) -> OptimizerWorkload:
    w = OptimizerWorkload(**{k: v for k, v in kw.items() if k in ("dim", "layers", "tokens", "steps", "lr")})
    params = w.layers * 8 * w.dim ** 2
    return OptimizerWorkload(**kw, flops=6.0 * params * w.tokens * w.steps, items=w.tokens * w.steps,
                             item_unit="tokens", resident_bytes=least_resident_bytes(w))  # capacity floor, above


WORKLOAD = optimizer_workload(precision="bf16", element_tol=2**-6, headline="memory", requires=aisp.Requirements(cuda=True),
                              ceiling_note=("profiled (memory, H200): _in_backward peaks at 2.37 GiB: masters and bf16 moments "
                                            "2.0 held, 0.36 in a call (activations, a layer's cast weight and gradient)"))


class ResidualMLP(nn.Module):
    """``layers`` blocks of x + W2 gelu(W1 x), no biases (the parameters are the GEMM weights)."""

    def __init__(self, w: OptimizerWorkload, gen: torch.Generator, device: torch.device) -> None:
        super().__init__()
        shapes = [(4 * w.dim, w.dim), (w.dim, 4 * w.dim)] * w.layers
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(s, generator=gen, device=device) * s[1] ** -0.5) for s in shapes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for up, down in zip(self.weights[::2], self.weights[1::2], strict=True):
            x = x + F.linear(F.gelu(F.linear(x, up)), down)
        return x


class Fp32AdamTraining(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x", "target")
    scratch = ("model", "params", "states")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.model = ResidualMLP(w, gen, self.device)
        self.x = torch.randn(w.tokens, w.dim, generator=gen, device=self.device)
        self.target = torch.randn(w.tokens, w.dim, generator=gen, device=self.device)
        self.start = [p.detach().clone() for p in self.model.parameters()]
        self.prepare()
        self.run()

    def prepare(self) -> None:
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=self.workload.lr, fused=True)

    @torch.no_grad()
    def restore(self) -> None:
        torch._foreach_copy_(self.params, self.start)
        if self.opt.state:
            torch._foreach_zero_(self.states)

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        for p in self.params:
            p.grad = None
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            pred = self.model(self.x)
            loss = F.mse_loss(pred.float(), self.target)
        loss.backward()
        self.opt.step()
        self.states = [t for s in self.opt.state.values() for t in s.values()]
        return loss.detach(), pred.detach()

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.restore()
        losses, preds = zip(*(self.step() for _ in range(self.workload.steps)), strict=True)
        return torch.stack(losses), preds[-1].bfloat16()


def get_benchmark() -> aisp.Benchmark:
    return Fp32AdamTraining()


if __name__ == "__main__":
    aisp.main(get_benchmark)
