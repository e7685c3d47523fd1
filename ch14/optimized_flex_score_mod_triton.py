"""Optimized score_mod, our Triton kernel: the ALiBi score_mod inlined in a head-dim-64 flash loop.

Baseline (baseline_flex_score_mod.py): SDPA over all S^2 scores with a 512 MiB bias tensor.
Optimized: ``ch14_alibi_flash.alibi_flash_attention`` instead of FlexAttention. The profiled
FlexAttention kernel (H200: 255 registers, one 4-warp program of 128 queries a scheduler pair, tensor
pipe 28%, issue 46%) runs too few warps to hide its softmax behind its products. This kernel is ch18
``_ahead``'s loop (71% of the bf16 peak at head dim 128: TMA tiles, two 64-row warpgroups, each P V
wgmma waited for in its iteration, the next Q K^T issued at the end of a tile, head-grouped launch
order), at head dim 64 with the score_mod inlined two ways, both in the autotune set:
- in the softmax, y = s log2(e)/8 + m_h log2(e) (kv - q0): the term -m_h log2(e) (q - q0) is one
  number per row, which softmax ignores; 365 SASS instructions a 128 x 64 tile (128 registers);
- in the tensor cores (``MMA_BIAS``): one more wgmma k-step adds m_h 8 kv to Q K^T from a table of
  its three bf16 parts (``bias_table``, (16 x 4096, 16) bf16, 2 MiB, made in setup from the slopes
  and the shape, as the baseline's bias is), so the softmax is plain flash's; 306 instructions a
  128 x 64 tile (105 registers), 457 a 128 x 128 tile (140 registers, one program an SM).
The autotuner times 4 configs at the first call (setup, reported as ``compile_s``).
Expect: measured (H200, 2026-11-29, two runs of 20 samples): 0.4166 / 0.4209 ms against
FlexAttention autotuned's 0.4921 / 0.4971 in the same runs (1.18x), 42% of the bf16 ceiling
(estimated 0.31-0.42 ms, 42-57%). 80% (0.22 ms) would need the SM to issue on 76% of its cycles
with the exp2 unit 67% busy beside the wgmma: not expected from Triton at head dim 64.
Run: python ch14/optimized_flex_score_mod_triton.py  |  aisp bench run -t ch14:flex_score_mod
"""

from __future__ import annotations

import os

import torch
from baseline_flex_score_mod import MaterializedBiasAttention, alibi_slopes
from ch14_alibi_flash import alibi_flash_attention, bias_table
from ch14_common import compile_metrics, timed_compile

import aisp

COMPILE_KEY = "alibi_flash_autotune"


class TritonScoreMod(MaterializedBiasAttention):
    def setup(self) -> None:
        if self.device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise aisp.Unavailable("the ALiBi kernel is Triton: it needs a CUDA GPU (or TRITON_INTERPRET=1)")
        super().setup()

    def prepare(self) -> None:
        """The slopes and their bias table (from the shape only), then the first call: the autotuner
        compiles and times its configs (untimed, like the FlexAttention variants' compile)."""
        w = self.workload
        self.slopes = alibi_slopes(w.heads, self.device)
        self.table = bias_table(self.slopes, w.seq, w.head_dim, self.q.dtype)
        timed_compile(COMPILE_KEY, self.device, self.run)

    def run(self) -> torch.Tensor:
        return alibi_flash_attention(self.q, self.k, self.v, self.slopes, self.table)

    def metrics(self) -> dict[str, float]:
        return compile_metrics(COMPILE_KEY)


def get_benchmark() -> aisp.Benchmark:
    return TritonScoreMod()


if __name__ == "__main__":
    aisp.main(get_benchmark)
