"""optimized_zero_sharding_multigpu_pipelined's pieces on a CPU: the fused shard update (Triton,
TRITON_INTERPRET=1 in a fresh process) against PyTorch's fused AdamW on the NCCL-rounded mean
(ch04_zero.adamw_pair_reference); the kernel through Triton's real compiler for sm_90 (no GPU); the
chunks a shard is cut into. The two-rank schedule runs on gloo in test_ch04_pairs.py, and on two GPUs
in its gpu test.

The interpreter (Triton 3.6) truncates fp32 to bf16 where the GPU rounds, so the interpreted check
averages gradients whose mean is a bf16 value and allows the bf16 weights one unit in the last place."""

from __future__ import annotations

from pathlib import Path

import pytest
from triton_cpu import compile_sm90, fits_sm90, run_interpreted

from aisp.harness.loader import import_module_at

pytest.importorskip("triton")
CH04 = Path(__file__).resolve().parents[1] / "ch04"


SCRIPT = """
import sys, torch
sys.path.insert(0, {ch04!r})
torch.manual_seed(0)
from ch04_zero import adamw_pair_reference
from ch04_zero_triton import BLOCK, adamw_pair_
n = 2 * BLOCK + 37  # a masked last program
master = torch.randn(n)
ref = [master.clone(), torch.zeros(n), torch.zeros(n)]
got = [master.clone(), torch.zeros(n), torch.zeros(n)]
for step in (1, 2, 3):
    own = (3 * torch.randn(n)).bfloat16()
    peer = own.clone()
    peer[::3] = -own[::3]  # mean 0 there; elsewhere own: bf16 values either way
    steps = torch.tensor(float(step))
    out_ref, out = (torch.full((n,), float("nan"), dtype=torch.bfloat16) for _ in range(2))
    adamw_pair_reference(*ref, steps, own, peer, out_ref)
    adamw_pair_(*got, steps, own, peer, out)
    for name, a, b, atol in zip(("master", "exp_avg", "exp_avg_sq"), ref, got, (1e-6, 1e-6, 1e-9)):
        # fp32 here, fp64 in PyTorch's coefficients: m = 0.9 m + 0.1 g cancels to ~1 ulp of its terms
        assert torch.allclose(a, b, rtol=1e-5, atol=atol), (step, name, (a - b).abs().max())
    assert not out.isnan().any()
    assert ((out.float() - out_ref.float()).abs() <= out_ref.float().abs() * 2.0**-7).all(), step
assert not torch.allclose(got[0], master, atol=1e-4)  # the weights moved
print("interpreted ok")
"""


def test_fused_update_matches_pytorchs_fused_adamw_over_steps_and_a_ragged_tail() -> None:
    run_interpreted(SCRIPT.format(ch04=str(CH04)))


def test_kernel_compiles_for_sm90_without_spills() -> None:
    sig = {**dict.fromkeys(["master", "exp_avg", "exp_avg_sq", "steps"], "*fp32"),
           **dict.fromkeys(["own", "peer", "out"], "*bf16"), "n": "i32", "log2_betas": "*fp64",
           **dict.fromkeys(["lr", "beta1", "beta2", "decay", "eps"], "fp32")}
    compiled = compile_sm90("ch04/ch04_zero_triton:adamw_pair_kernel", sig, {"BLOCK": 2048}, {"num_warps": 8},
                            divisible=("n",))
    ptx = compiled.asm["ptx"]
    assert "sqrt.rn.f32" in ptx and "div.rn.f32" in ptx  # IEEE sqrt and division, as PyTorch's kernel
    assert "cvt.rn.bf16" in ptx  # rounds to bf16 (the interpreter truncates)
    assert ptx.count("ld.global.v4.b32") == 8  # 16-byte loads: 2 each of master, m, v; 1 each gradient
    fits_sm90(compiled)


def test_chunks_cover_a_shard_once() -> None:
    bounds = import_module_at(CH04 / "optimized_zero_sharding_multigpu_pipelined.py").chunk_bounds
    assert bounds(64, 16) == [(4 * i, 4 * i + 4) for i in range(16)]
    assert bounds(50, 16) == [(0, 50)]  # not divisible: one chunk
    assert bounds(64 * 2**20)[-1] == (60 * 2**20, 64 * 2**20) and len(bounds(64 * 2**20)) == 16
