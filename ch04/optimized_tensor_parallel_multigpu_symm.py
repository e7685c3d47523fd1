"""Optimized tensor-parallel MLP (2 GPUs), symmetric-memory variant: PyTorch's fused
all-gather-matmul and matmul-reduce-scatter (``torch.ops.symm_mem``, "async TP").

Baseline (baseline_tensor_parallel_multigpu.py): all-gather all tokens, GEMMs, reduce-scatter, in
turn: NVLink and the tensor cores take turns.
Optimized: ``fused_all_gather_matmul`` splits the gather by rank: while the GEMM runs on this
rank's own tokens, the peer's shard is pulled over NVLink into a symmetric-memory workspace by the
copy engines (no SMs taken from the GEMM), then its GEMM follows; ``fused_matmul_reduce_scatter``
computes the partial sums chunk by chunk and reduces each while the next is computed. The NCCL
variant (optimized_tensor_parallel_multigpu.py) overlaps too, but its kernels take SMs from the
GEMMs it overlaps. On a world of one or a non-NCCL group (CPU tests) it runs the blocking path.
Expect (measured, 2 x H200, 2026-11-27): SLOWER: 2.335 -> 2.570 ms, 0.91x [0.77, 1.08], and 1.898 ->
2.196 ms, 0.86x in a second run (estimated 1.0-1.1x): the copy-engine gather and chunked reduce do
not hide what the ~0.2-0.3 ms of collectives cost. Not profiled.
Run: aisp bench run -t ch04:tensor_parallel_multigpu
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from baseline_tensor_parallel_multigpu import BlockingTensorParallel

import aisp


class FusedSymmetricTensorParallel(BlockingTensorParallel):
    def prepare(self) -> None:
        super().prepare()
        self.fused = self.world > 1 and dist.get_backend() == "nccl"
        if self.fused:
            import torch.distributed._symmetric_memory as symm_mem

            self.group_name = dist.group.WORLD.group_name
            symm_mem.enable_symm_mem_for_group(self.group_name)

    def fused_block(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's tokens' block output: fused all-gather-matmul, GELU, fused matmul-reduce-scatter."""
        ops = torch.ops.symm_mem
        _, (hidden,) = ops.fused_all_gather_matmul(x, [self.w1], 0, self.group_name, return_A=False)
        return ops.fused_matmul_reduce_scatter(F.gelu(hidden, approximate="tanh"), self.w2, "sum", 0, self.group_name)

    def run(self) -> torch.Tensor:
        return self.fused_block(self.x) if self.fused else super().run()


def get_benchmark() -> aisp.Benchmark:
    return FusedSymmetricTensorParallel()


if __name__ == "__main__":
    aisp.main(get_benchmark)
