"""Baseline compile modes: two eager bf16 decoder blocks at a small, launch-bound batch.

Baseline: inference through two pre-norm transformer blocks (``aisp.kits.gpt.Block``: width
1,024, 16 heads, causal SDPA, 4x GELU MLP) on 8 sequences of 128 tokens, in eager PyTorch.
Each block launches ~15 kernels through Python modules (~150 us of host time per block), while
its GEMMs (26 GFLOP per block) take ~50 us on an H200: the GPU waits on the host.
Optimized: ``torch.compile`` in three modes, each a variant:
- ``_default``: Inductor fuses the LayerNorms, residual adds and GELU into Triton kernels and
  launches the rest from generated Python: fewer kernels, fewer passes, less host time;
- ``_reduce_overhead``: the same kernels replayed as one CUDA graph (1.2 us per node);
- ``_max_autotune``: Triton/cuBLAS GEMM choices benchmarked per shape, plus CUDA graphs.
Compilation runs in setup() and is reported as the metric ``compile_s`` (first setup in the
process, FX graph cache off; see ch14_common.py): the price each mode asks before its speedup.
Expect: H200, measured: eager 0.529 ms; default 1.04x [0.96, 1.12] (compile 11.3 s),
max-autotune 1.64x [1.48, 1.81] (20.2 s), reduce-overhead 1.77x [1.65, 1.90] (0.306 ms; 0.76 s,
set up after the other two modes in the same process, so with warm in-process caches).
Tolerance: bf16 weights and activations; compiled code keeps the residual add and LayerNorm in
fp32 registers where eager rounds them to bf16, and the difference grows with depth (ch13's
regional_compile measured 0.094 at most over 8 such blocks): element_tol 0.02 (0.1 absolute at
max |h| ~5), rtol 5e-2.
Run: python ch14/baseline_compile_modes.py  |  aisp bench run -t ch14:compile_modes
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from ch14_common import compile_metrics, timed_compile
from torch import nn

import aisp
from aisp.kits.gpt import BlockStack, GPTConfig, init_weights_


@dataclass(frozen=True, kw_only=True)
class BlockWorkload(aisp.Workload):
    model: GPTConfig = field(default_factory=lambda: GPTConfig(seq=128, dim=1024, heads=16, layers=2))
    batch: int = 8


def block_workload(**kw: object) -> BlockWorkload:
    w = BlockWorkload(**kw)
    cfg, tokens = w.model, w.batch * w.model.seq
    flops = 2.0 * tokens * cfg.layers * (12 * cfg.dim**2 + cfg.dim * cfg.seq)
    return BlockWorkload(**kw, flops=flops, items=tokens, item_unit="tokens", precision="bf16",
                         element_tol=0.02, rtol=5e-2, requires=aisp.Requirements(cuda=True, packages=("triton",)),
                         timeout_s=600,
                         window="idle")


WORKLOAD = block_workload(
    ceiling_note="profiled (torch profiler, H200): a call's kernels span 176 us on the GPU (GEMMs 96 us, 540 TFLOP/s), "
                 "the compiled region's host time 141 us under the profiler")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


class EagerBlocks(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("hidden",)
    mode: str | None = None
    """torch.compile mode; None runs eager."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        stack = init_weights_(BlockStack(w.model).to(self.device), gen).to(torch.bfloat16).eval()
        self.hidden = torch.randn(w.batch, w.model.seq, w.model.dim, generator=gen, device=self.device,
                                  dtype=torch.bfloat16)
        self.model = stack if self.mode is None else timed_compile(self.mode, self.device,
                                                                   lambda: self.compile(stack))

    def compile(self, stack: BlockStack) -> nn.Module:
        """Compile and call three times (CUDA-graph modes record on the second or third call)."""
        model = torch.compile(stack, mode=self.mode, dynamic=False)
        for _ in range(3):
            self.model = model
            self.run()
        return model

    @torch.no_grad()
    def run(self) -> torch.Tensor:
        if self.mode in CUDA_GRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()
            return self.model(self.hidden).clone()  # the next replay reuses the graph's output buffer
        return self.model(self.hidden)

    def metrics(self) -> dict[str, float]:
        return compile_metrics(self.mode) if self.mode else {}


def get_benchmark() -> aisp.Benchmark:
    return EagerBlocks()


if __name__ == "__main__":
    aisp.main(get_benchmark)
