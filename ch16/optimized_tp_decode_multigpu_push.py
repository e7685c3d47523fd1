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
Expect: not yet measured. Estimate (arithmetic, not a measurement): ``_fused`` 10.05-10.16 ms (0.63 ms
a step); each of the 5 sites saves a kernel launch (~1-2 us in a graph) and one of the one-shot
kernel's two barriers and its P2P load round trip (~3-5 us), ~4-7 us a site, ~20-35 us a step: 16 steps
~9.6-9.8 ms, 78-80% of the 7.66 ms ceiling (80% needs <= 9.58 ms).
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
