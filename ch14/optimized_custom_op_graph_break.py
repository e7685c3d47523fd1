"""Optimized custom op: the Triton kernel registered with ``torch.library.triton_op``.

Baseline (baseline_custom_op_graph_break.py): an untraceable launcher splits each of 8 layers
into two compiled graphs with an eager launch between them.
Optimized: ``@torch.library.triton_op("ch14::relu_squared", mutates_args={})`` around a launcher
that calls the same kernel through ``torch.library.wrap_triton``. Dynamo and Inductor see an op
whose output shape comes from tracing the launcher with fake tensors, so the whole stack is one
graph: one guard check per call, Inductor launches the user kernel from its generated code and
fuses the residual add with the next layer's LayerNorm. The op also works eagerly, under
``torch.export`` and in CUDA graphs, which a disabled region does not.
Expect: measured on an H200 (re-run after the fix): 1.481 -> 0.636 ms, 2.39x [2.06, 2.78],
54.0 TFLOP/s, compile_s 1.87 s (a real compile). The first H200 run, 0.81x [0.75, 0.88],
1.216 -> 1.489 ms, had both stacks plain nn.Sequential: Dynamo served this model the baseline's
graphs, compile_s 0.005 s, and the op ran eagerly through the dispatcher between the breaks.
Run: python ch14/optimized_custom_op_graph_break.py  |  aisp bench run -t ch14:custom_op_graph_break
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
from baseline_custom_op_graph_break import BLOCK, BrokenStack, GraphBreakingOp, _relu_squared
from torch import nn

import aisp


@torch.library.triton_op("ch14::relu_squared", mutates_args={})
def relu_squared(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    torch.library.wrap_triton(_relu_squared)[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y


class OneGraphStack(BrokenStack):
    """The same loop in a code object of its own, so Dynamo's cache for it holds only this
    model's one graph (BrokenStack.forward's holds the baseline's graphs, same process)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = layer(x)
        return x


class TritonOp(GraphBreakingOp):
    key = "triton_op"
    stack: type[nn.Sequential] = OneGraphStack

    def activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return relu_squared


def get_benchmark() -> aisp.Benchmark:
    return TritonOp()


if __name__ == "__main__":
    aisp.main(get_benchmark)
