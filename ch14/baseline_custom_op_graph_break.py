"""Baseline custom op: a Triton kernel that torch.compile cannot see into breaks the graph.

Baseline: 8 residual MLP layers (LayerNorm, 1,024 -> 4,096 Linear, squared ReLU, 4,096 -> 1,024
Linear, residual add; bf16, 256 tokens) under ``torch.compile``. The squared ReLU is a
hand-written Triton kernel called through a launcher that Dynamo cannot trace, marked
``torch.compiler.disable`` as libraries do for such launchers: each layer's graph ends before
it and resumes after it. Per call: 16 compiled graphs entered (guards checked each time), 8
eager launches in between, and no fusion across the breaks (the residual add cannot meet the
next LayerNorm). At 256 tokens the GEMMs take ~10 us per layer: the host time of the breaks
sets the pace.
Optimized (optimized_custom_op_graph_break.py): the same kernel registered with
``torch.library.triton_op`` (launched through ``wrap_triton``): Dynamo traces it as an op with
a known output, the model is one graph, and Inductor fuses around it.
Expect: measured on an H200 (re-run after the fix): 1.481 -> 0.636 ms, 2.39x [2.06, 2.78]
(the first run, 0.81x, timed the optimized model on the baseline's broken graphs, see
BrokenStack). CPU: not run (Triton kernel);
the graph counts (16 graph entries and 8 breaks vs 1 graph) are checked on a CPU in the tests.
Tolerance: bf16, both compiled; the one-graph variant fuses the residual add with the next
LayerNorm in fp32 where the broken graph stores the sum in bf16 (as in compile_modes): element_tol
0.02 (0.1 absolute at max |h| ~5), rtol 5e-2.
Run: python ch14/baseline_custom_op_graph_break.py  |  aisp bench run -t ch14:custom_op_graph_break
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from ch14_common import compile_metrics, timed_compile
from torch import nn

import aisp

BLOCK = 2048


@dataclass(frozen=True, kw_only=True)
class MLPStackWorkload(aisp.Workload):
    layers: int = 8
    tokens: int = 256
    dim: int = 1024


def stack_workload(**kw: int) -> MLPStackWorkload:
    w = MLPStackWorkload(**kw)
    # Latency: each layer's two GEMMs are cuBLAS calls that Inductor's Python wrapper makes one by one
    # (aten mm/addmm, an eager launch each); its Triton launches (LayerNorm, the op) have no measured floor.
    return MLPStackWorkload(**kw, flops=2.0 * w.tokens * w.layers * 8 * w.dim**2, items=w.tokens,
                            latency=aisp.LatencyCounts(launches=2 * w.layers),
                            item_unit="tokens", precision="bf16", element_tol=0.02, rtol=5e-2,
                            requires=aisp.Requirements(cuda=True, packages=("triton",)), timeout_s=600,
                            window="idle")


WORKLOAD = stack_workload(
    ceiling_note="profiled (torch profiler, H200): the graph's 33 kernels (163 us) spread over 0.98 ms, "
                 "22 us apart under the profiler: host launches (addmm 21.8 us each)")


@triton.jit
def _relu_squared(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    r = tl.maximum(x, 0.0)
    tl.store(y_ptr + offs, (r * r).to(y_ptr.dtype.element_ty), mask=offs < n)


def launch_relu_squared(x: torch.Tensor) -> torch.Tensor:
    """relu(x)^2 by the Triton kernel, launched directly."""
    y = torch.empty_like(x)
    _relu_squared[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y


@torch.compiler.disable
def opaque_relu_squared(x: torch.Tensor) -> torch.Tensor:
    return launch_relu_squared(x)


class SquaredReluMLP(nn.Module):
    def __init__(self, dim: int, act: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.norm, self.fc, self.out = nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(self.act(self.fc(self.norm(x))))


class BrokenStack(nn.Sequential):
    """The layers in turn. Dynamo keeps compiled code per code object, shared by every instance:
    each variant's stack class has its own ``forward`` so the optimized model is not served the
    baseline's broken graphs (nn.Sequential's shared forward did that in the first H200 run)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = layer(x)
        return x


def mlp_stack(w: MLPStackWorkload, act: Callable[[torch.Tensor], torch.Tensor],
              stack: type[nn.Sequential] = BrokenStack) -> nn.Sequential:
    return stack(*(SquaredReluMLP(w.dim, act) for _ in range(w.layers)))


class GraphBreakingOp(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)
    key = "graph_break"
    stack: type[nn.Sequential] = BrokenStack

    def activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return opaque_relu_squared

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        stack = mlp_stack(w, self.activation(), self.stack).to(self.device)
        with torch.no_grad():
            for p in stack.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, device=self.device) * (0.02 if p.dim() > 1 else 0.1))
        stack = stack.to(torch.bfloat16).eval()
        self.x = torch.randn(w.tokens, w.dim, generator=gen, device=self.device).to(torch.bfloat16)
        self.model = timed_compile(self.key, self.device, lambda: self.compile(stack))

    def compile(self, stack: nn.Module) -> nn.Module:
        self.model = torch.compile(stack, dynamic=False)
        self.run()
        return self.model

    @torch.no_grad()
    def run(self) -> torch.Tensor:
        return self.model(self.x)

    def metrics(self) -> dict[str, float]:
        return compile_metrics(self.key)


def get_benchmark() -> aisp.Benchmark:
    return GraphBreakingOp()


if __name__ == "__main__":
    aisp.main(get_benchmark)
