"""Optimized predication (CUDA C++): one branch-free path for every lane, then a select.

Baseline (baseline_predication.py): ``if (x < 0) y = -P(-x); else y = P(x);`` on random signs:
each warp runs both 128-FMA sides, half its lanes idle in each.
Optimized: ``r = P(|x|); y = x < 0 ? -r : r;`` (odd_branch.cu, ``odd_select``): the lanes no longer
disagree about which instructions to run, only about a sign flip, which a select (FSEL) does without
a branch. Half the FMA instructions; the same results bit for bit. Its body is the baseline's (4
elements a thread a step on a resident grid, 512 FFMA of the loop's 549 SASS instructions, the next
step's loads issued amid them), so only the branch differs.
Expect: measured, H200, 2026-11-29, the 4-element body, twice: 1.93x [1.93, 1.93] (0.2987 -> 0.1548
ms), 55.5 TFLOP/s useful: 88% of the measured FFMA rate (62.8); one element a thread it was 0.198 ms, 69%.
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
