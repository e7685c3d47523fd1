"""ch15_page_sums on a CPU: the Triton kernel (TRITON_INTERPRET=1 in a fresh process) equals the pure-torch
statement of PyTorch's CUDA summation order bit for bit, in both warp-fold orders and run a layer range at a
time (the state between runs); that statement is a sum (close to fp64's) and the two orders differ; the kernel
compiles for sm_90 without spills; the shapes it is used for. Against PyTorch's own CUDA reduction: the gpu
test in test_ch15_gpu.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from triton_cpu import compile_sm90, resource_usage, run_interpreted

from aisp.harness.loader import import_module_at

CH15 = Path(__file__).resolve().parents[1] / "ch15"

SCRIPT = """
import sys, torch
sys.path.insert(0, {ch15!r})
from ch15_page_sums import PageSums, reference
gen = torch.Generator().manual_seed(1)
shape = (4, 17, 2, 16, 64)
pool = (torch.randn(shape, generator=gen) * torch.randint(-6, 7, shape, generator=gen).float().exp2()).bfloat16()
for down in (True, False):
    ref = reference(pool, down)
    for runs in ([(0, 4)], [(0, 1), (1, 2), (2, 3), (3, 4)], [(0, 3), (3, 4)]):
        sums = PageSums(pool, PageSums.workspace(2, pool).fill_(float("nan")), down)
        out = torch.full((17,), float("nan"))
        for a, b in runs:
            sums.add(pool, 1, slice(a, b), out)
        assert torch.equal(out.view(torch.int32), ref.view(torch.int32)), (down, runs, (out - ref).abs().max())
print("interpreted ok")
"""


def test_kernel_equals_the_stated_order_bit_for_bit_in_runs_of_layers() -> None:
    run_interpreted(SCRIPT.format(ch15=str(CH15)))


def test_stated_order_is_a_sum_and_the_fold_orders_differ() -> None:
    ps = import_module_at(CH15 / "ch15_page_sums.py")
    gen = torch.Generator().manual_seed(2)
    pool = torch.randn(8, 19, 4, 16, 64, generator=gen).bfloat16()
    exact = pool.double().sum(dim=(0, 2, 3, 4))
    down, up = ps.reference(pool, True), ps.reference(pool, False)
    assert torch.allclose(down.double(), exact, atol=1e-3) and torch.allclose(up.double(), exact, atol=1e-3)
    assert not torch.equal(down, up)


def test_kernel_applies_to_the_pairs_pool_only_on_cuda_bf16() -> None:
    ps = import_module_at(CH15 / "ch15_page_sums.py")
    assert not ps.applies(torch.zeros(8, 4097, 4, 16, 64, dtype=torch.bfloat16))  # CPU: PyTorch's CPU order
    assert not ps.applies(torch.zeros(2, 9, 2, 4, 16))


@pytest.mark.parametrize("first, last, down", [(True, False, True), (False, False, True), (False, True, True),
                                               (False, True, False)])
def test_kernel_compiles_for_sm90_without_spills(first, last, down) -> None:
    sig = {"pool": "*bf16", "state": "*fp32", "out": "*fp32", "layer_stride": "i32", "k0": "i32", "k1": "i32"}
    compiled = compile_sm90("ch15/ch15_page_sums_triton:page_sums_kernel", sig,
                            {"S": 8, "FIRST": first, "LAST": last, "DOWN": down}, {"num_warps": 4},
                            divisible=("layer_stride",))
    ptx = compiled.asm["ptx"]
    assert "fma" not in ptx  # adds only, each rounded as PyTorch's
    assert ptx.count("ld.global.v2.b32") == 4  # 8 bytes of bf16 a thread, 4 k-steps an iteration
    usage = resource_usage(compiled)
    assert usage["LOCAL"] == 0 and usage["REG"] <= 128
