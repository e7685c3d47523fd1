"""Optimized TP decode (2 GPUs), push: ``_fused``'s step with its 5 one-shot all-reduce kernels a step
folded into the kernels that use the sums: 23 kernels a step instead of 28.

Baseline (baseline_tp_decode_multigpu.py): each GPU decodes the batch of 8 with the whole 2.24B
decoder, one graph replay per step reading 3.95 GB of weights (memory-bound).
Optimized: ``optimized_tp_decode_multigpu_fused.py``'s split (half of every block and of the LM head's
rows per GPU, 1.97 GB a step per GPU), kernels and one-graph loop, with ``ch16_tp_push.PushTPDecode``'s
all-reduces: each row-parallel GEMM's partial row is stored by the norm kernel into the peer GPU's
inbox over NVLink (a push: posted stores, no P2P load round trip), the two programs of a row meet at
a flag pair in the symmetric buffer's signal pad, and the same kernel adds its partial, the peer's
(read from local memory), the residual and applies the next RMSNorm. The LM head's half-rows are
pushed the same way and the top-4 kernel reads the whole row locally. Gone a step: 5
``one_shot_all_reduce`` kernels (9-13 us each in the profile, two barriers and P2P loads each) and the
(8, 32,000) copy of the logits' sum; added: a 16 KB push and one flag pair inside 4 norm kernels and
the top-4 kernel.
Expect (measured, 2 x H200, 2026-11-30, two runs of 20 samples): 9.5039 / 9.5015 ms against ``_fused``'s
9.9711 / 9.9849 and the baseline's 20.4468 / 20.4223 in the same runs: 2.154x [2.136, 2.173] / 2.134x
[2.108, 2.161], 80.5% / 80.6% of the 7.66 ms ceiling (``_fused``: 75-76%), the pair's best. Estimated
~9.6-9.8 ms, 78-80% (~20-35 us a step saved); measured 9.50 ms, 80.5%: ~30 us a step under ``_fused``.
Tolerance: as ``_fused``'s: the sum of the two partials rounds once to bf16, as the one-shot kernel's.
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

from ch16_tp import Shard
from ch16_tp_push import PushTPDecode
from optimized_tp_decode_multigpu_fused import FusedTensorParallelDecode

import aisp
from aisp.kits.llm import TOP


class PushTensorParallelDecode(FusedTensorParallelDecode):
    def make_step(self, shard: Shard) -> PushTPDecode:
        w = self.workload
        return PushTPDecode(self.model, self.cache, shard, w.batch, w.prompt + w.steps, w.steps - 1, TOP)


def get_benchmark() -> aisp.Benchmark:
    return PushTensorParallelDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
