"""ch16_top_p's fused top-p kernel (gpu_sampling's ``_fused``) without a GPU: under the Triton interpreter
it draws ``top_p_race``'s token in every row at five values of p, on rows built to reach each of its
paths (candidates and buffer shrunk to 16 and 32 so a 300-token row reaches them): peaked rows whose
top 16 already hold p (the fast path surely), flat rows whose top 32 do not (the slow path surely),
all-equal rows (no floor fits: the slow path's tie ranks), many-way ties, -0.0 beside 0.0, a row
that repeats itself. Its sm_90 build at the pair's size, and the wrapper's refusals."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO
from triton_cpu import compile_sm90, resource_usage, run_interpreted

from aisp.harness.loader import import_module_at

SCRIPT = """
import sys
import torch
sys.path[:0] = [{ch16!r}]
from baseline_gpu_sampling import top_p_race
import ch16_top_p as K

CANDIDATES, BUFFER, V = 16, 32, 300
gen = torch.Generator().manual_seed(0)
def randn(rows):
    return torch.randn(rows, V, generator=gen)
peaked, flat, equal = 4.0 * randn(4), 0.1 * randn(3), torch.zeros(2, V)
head = randn(3)
head[:, :40] = 3.0  # 40-way ties at the top
halves = torch.round(2 * randn(4)) / 2  # many-way ties everywhere
one = torch.full((2, V), -50.0)
one[:, 7] = 10.0
zeros = torch.where(torch.rand(2, V, generator=gen) < 0.5, -0.0, 0.0)
zeros[:, ::50] = 1.0  # -0.0 and 0.0 tie in the reference's sort
twice = 4.0 * randn(2)
twice[:, V // 2:] = twice[:, :V - V // 2].clone()
logits = torch.cat([peaked, flat, equal, head, halves, one, zeros, twice, -1e-3 * torch.rand(3, V, generator=gen)])
rows = logits.shape[0]

def paths(p):
    # which path a row must take, from the reference's own float64 probabilities: the candidates are the
    # row's top n in its order with n <= BUFFER, and with distinct values the bisection finds n >= CANDIDATES
    probs = torch.softmax(logits.double(), -1).sort(-1, descending=True).values.cumsum(-1)
    distinct = torch.tensor([len(set(r.tolist())) == V for r in logits])
    fast = distinct & (probs[:, CANDIDATES - 1] >= p + 1e-9)
    slow = probs[:, BUFFER - 1] < p - 1e-9
    return fast, slow

for p in (0.9, 0.5, 0.999, 1.0, 0.01):
    keys = torch.arange(rows * V).view(rows, V) + 5 * V
    want = top_p_race(logits, p, keys)
    got = K.top_p_race_rows(logits, torch.tensor([p], dtype=torch.float64), 5, torch.empty(rows, dtype=torch.int64),
                            torch.empty(rows * BUFFER, dtype=torch.int64), candidates=CANDIDATES, buffer=BUFFER)
    assert torch.equal(want, got), (p, (want != got).nonzero().flatten().tolist())
    fast, slow = paths(p)
    print(p, "fast rows", fast.nonzero().flatten().tolist(), "slow rows", slow.nonzero().flatten().tolist())
    if p == 0.9:
        assert fast[:4].all() and slow[4:9].all(), "the peaked rows must take the fast path, the flat and equal the slow"
print("interpreted ok")
"""


def test_fused_top_p_draws_the_references_token_on_every_path() -> None:
    run_interpreted(SCRIPT.format(ch16=str(REPO / "ch16")))


def test_fused_top_p_builds_for_sm90_at_the_pairs_size_in_one_sms_registers() -> None:
    """32 warps a program, with the wrapper's options: more than the 32 registers a thread ptxas chose
    when not told (it spilled), at most the 64 that let 1,024 threads share one SM's 65,536."""
    top_p = import_module_at(REPO / "ch16" / "ch16_top_p.py")
    sig = {"logits_ptr": "*fp32", "tokens_ptr": "*i64", "p_ptr": "*fp64", "scratch_ptr": "*i64", "vocab": "i32",
           "first_key_row": "i32"}
    consts = {"BLOCK": 32768, "CANDIDATES": top_p.CANDIDATES, "BUFFER": top_p.BUFFER,
              **dict(zip(("M1", "M2", "M3"), top_p.HASH_MULTIPLIERS, strict=True))}
    kernel = compile_sm90("ch16/ch16_top_p:_top_p_race", sig, consts, top_p.launch_options(32))
    assert 32 < resource_usage(kernel)["REG"] <= 64


@pytest.mark.parametrize("bad", ["fp16 logits", "p as fp32", "short scratch", "candidates over buffer", "buffer 1000",
                                 "keys past 2^31"])
def test_fused_top_p_refuses_what_it_cannot_sample(bad: str) -> None:
    top_p = import_module_at(REPO / "ch16" / "ch16_top_p.py")
    args = {"logits": torch.zeros(4, 300), "p": torch.tensor([0.9], dtype=torch.float64), "first_key_row": 0,
            "tokens": torch.empty(4, dtype=torch.int64), "scratch": torch.empty(4 * 64, dtype=torch.int64),
            "candidates": 16, "buffer": 64}
    args |= {"fp16 logits": {"logits": torch.zeros(4, 300, dtype=torch.float16)},
             "p as fp32": {"p": torch.tensor([0.9])}, "short scratch": {"scratch": torch.empty(100, dtype=torch.int64)},
             "candidates over buffer": {"candidates": 128}, "buffer 1000": {"buffer": 1000},
             "keys past 2^31": {"first_key_row": 2**31 // 300}}[bad]
    with pytest.raises(ValueError, match="top_p_race_rows"):
        top_p.top_p_race_rows(**args)
