"""The MoE kit on a CPU: the per-expert loop equals a per-token reference, every sorted path (grouped
GEMM, padded bmm, a loop over sorted slices) gives the loop's answer, both ways of counting agree,
and the workload's accounting is what chapters 17 and 20 declare."""

from __future__ import annotations

import pytest
import torch

from aisp.harness.benchmark import Requirements
from aisp.kits import moe

CPU = torch.device("cpu")
SMALL = dict(tokens=40, dim=16, ffn=8, experts=6, top_k=2)


@pytest.fixture
def inputs() -> tuple[torch.Tensor, ...]:
    return moe.moe_inputs(moe.MoEWorkload(**SMALL), torch.Generator().manual_seed(0), CPU)


def test_inputs_are_seeded_and_shaped(inputs: tuple[torch.Tensor, ...]) -> None:
    again = moe.moe_inputs(moe.MoEWorkload(**SMALL), torch.Generator().manual_seed(0), CPU)
    assert [t.shape for t in inputs] == [(40, 16), (16, 6), (6, 16, 16), (6, 8, 16)]
    assert all(t.dtype == torch.float32 and torch.equal(t, u) for t, u in zip(inputs, again, strict=True))


def test_masked_loop_equals_a_per_token_reference(inputs: tuple[torch.Tensor, ...]) -> None:
    x, w_router, w_gate_up, w_down = inputs
    ids, gates = moe.route(x, w_router, 2)
    assert torch.allclose(gates.sum(-1), torch.ones(40))
    ref = torch.stack([sum(g * (moe.swiglu(x[t] @ w_gate_up[e]) @ w_down[e]) for e, g in zip(ids[t], gates[t], strict=True))
                       for t in range(40)])
    torch.testing.assert_close(moe.masked_moe(x, w_router, w_gate_up, w_down, 2), ref)


@pytest.mark.parametrize("count_on_device", [False, True])
def test_sorted_paths_give_the_loops_answer(inputs: tuple[torch.Tensor, ...], count_on_device: bool) -> None:
    x, w_router, w_gate_up, w_down = inputs
    ids, gates = moe.route(x, w_router, 2)
    order, counts = moe.sort_by_expert(ids, 6, count_on_device)
    assert torch.equal(counts, torch.bincount(ids.reshape(-1), minlength=6))
    sorted_ids = ids.reshape(-1)[order]
    assert torch.equal(sorted_ids, sorted_ids.sort().values)
    xs = x[order // 2]
    loop = torch.cat([moe.swiglu(r @ w_gate_up[e]) @ w_down[e] for e, r in enumerate(xs.split(counts.tolist()))])
    torch.testing.assert_close(moe.padded_ffn(xs, sorted_ids, counts, w_gate_up, w_down), loop)
    torch.testing.assert_close(moe.expert_ffn(xs, sorted_ids, counts, w_gate_up, w_down, padded=True), loop)
    if moe.HAS_GROUPED_MM:
        torch.testing.assert_close(moe.grouped_ffn(xs, counts, w_gate_up, w_down), loop)
    out = torch.zeros(x.shape).index_add_(0, order // 2, loop * gates.reshape(-1)[order, None])
    torch.testing.assert_close(out, moe.masked_moe(x, w_router, w_gate_up, w_down, 2))


def test_workload_accounting() -> None:
    w = moe.moe_workload(Requirements(cuda=True), 3, element_tol=0.5, **SMALL)
    assert w.flops == 2.0 * 40 * 16 * 6 + 6.0 * 80 * 16 * 8
    assert w.bytes == 2.0 * 6 * 3 * 16 * 8 + 2.0 * 40 * 16 * 3
    assert (w.items, w.item_unit, w.precision, w.element_tol, w.requires.cuda) == (40, "tokens", "bf16", 0.5, True)
    assert moe.moe_workload(Requirements(), 2, **SMALL).bytes == w.bytes - 2.0 * 40 * 16
