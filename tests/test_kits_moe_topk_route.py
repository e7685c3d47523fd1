"""aisp.kits.moe_topk_route under the Triton interpreter: the routing's properties at chapter 17's and
chapter 20's launch shapes (their tests check the variants built on it; ch17's its sm_90 compile)."""

from __future__ import annotations

from triton_cpu import run_interpreted

ROUTE_INTERPRETED = """
import torch
from aisp.kits.moe_combine import combine_rows, gather_combine
from aisp.kits.moe_schedule import schedule
from aisp.kits.moe_topk_route import TOKENS, topk_route
torch.manual_seed(0)
# (tokens, experts, top_k, bm, tokens a program): ch17's small programs of 8 tokens, and ch20's stage 5 at the
# kit's 32 (a short second program): the CPU tests' 8 experts, top-2, and the H200's 64 experts, top-8, bm 128;
# at both past the scan's 64-program step (75 programs; 65, the last one partial)
for tokens, experts, k, bm, per_program in ((70, 8, 2, 16, 8), (600, 8, 2, 16, 8), (33, 64, 8, 128, TOKENS),
                                             (5, 6, 3, 4, 8), (96, 8, 2, 16, TOKENS), (515, 64, 8, 128, 8)):
    logits = (torch.randn(tokens, experts) * 4).round() / 4  # coarse values: equal logits at the k-th place
    ids, gates, order, row, sched = topk_route(logits, k, bm, tokens_per_program=per_program)
    want = torch.sort(-logits, dim=1, stable=True).indices[:, :k]  # descending, equal logits lowest expert first
    assert torch.equal(ids.long(), want), (ids.long() != want).any(1).sum()
    assert torch.allclose(gates, torch.softmax(logits.gather(1, want), -1), rtol=1e-5, atol=1e-6)
    flat = want.reshape(-1)
    assert torch.equal(order.long(), flat.argsort(stable=True))
    assert torch.equal(row[order.long()], torch.arange(tokens * k, dtype=torch.int32))
    assert torch.equal(sched, schedule(torch.bincount(flat, minlength=experts), bm))
    if tokens * k <= 300 and tokens != 96:  # the combine reads rows and gates only: top-2, 3 and 8 at small
        # shapes say what 2070 x 8 rows would (~70 s in the interpreter); 96 x 2 is 70 x 2's path again
        y = torch.randn(tokens * k, 40).to(torch.bfloat16)
        assert torch.equal(combine_rows(y, row, gates, block=32), gather_combine(y, order.long(), gates, block=32))
print("interpreted ok")
"""


def test_topk_route_sorts_and_inverts_as_torch_under_the_interpreter() -> None:
    """Top-k ids as a stable descending sort gives them (equal logits: the lowest expert first, as torch.topk
    on CUDA), the softmax of the k, argsort's stable order, its inverse, the schedule (more programs than
    the scan's 64-row step), and the combine given the inverse equal to gather_combine."""
    run_interpreted(ROUTE_INTERPRETED)
