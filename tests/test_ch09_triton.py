"""Chapter 9's Triton kernels on a CPU through the Triton interpreter (TRITON_INTERPRET=1, set before
triton is imported in the process each script's fresh fork comes from: tests/ci_triton_scripts.py),
against the pairs' own eager baselines; then Triton's real compiler for sm_90 (no GPU), which
rejects what the interpreter accepts.

The interpreter (Triton 3.6) truncates fp32 to bf16 and multiplies bf16 tiles wrongly in tl.dot, so
the interpreted checks run in fp32 and fp16; the GPU tests check bf16 (test_ch09_gpu.py)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from ci_triton_scripts import assert_ran, run_scripts

pytest.importorskip("triton")
REPO = Path(__file__).resolve().parents[1]


RMSNORM = """
        from baseline_fused_rmsnorm import rmsnorm_eager
        from ch09_rows import rmsnorm
        for dt in (torch.float32, torch.float16):
            x, w = (3 * torch.randn(7, 300)).to(dt), (1 + 0.1 * torch.randn(300)).to(dt)
            ref = rmsnorm_eager(x, w, 1e-6).float()
            out = rmsnorm(x, w, 1e-6, torch.full_like(x, float("nan"))).float()
            assert ((out - ref).abs() <= 2e-3 * ref.abs() + 1e-6).all(), (dt, (out - ref).abs().max())
    """


def test_rmsnorm_kernel_matches_the_eager_module_on_ragged_rows(interpreted: dict) -> None:
    assert_ran(interpreted, "rmsnorm")


SOFTMAX = """
        from baseline_fused_softmax import UnfusedSoftmax
        from ch09_rows import softmax
        bench = UnfusedSoftmax()
        bench.x = 8 * torch.randn(6, 1000)
        bench.x[0, :700] = -1e4  # the running max must grow across blocks of this row
        ref = bench.run()
        out = softmax(bench.x, torch.full_like(bench.x, float("nan")), block=256)
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-7), (out - ref).abs().max()
        assert torch.allclose(out.sum(-1), torch.ones(6))
    """


def test_online_softmax_matches_the_three_step_softmax_over_several_blocks(interpreted: dict) -> None:
    assert_ran(interpreted, "softmax")


MATMUL = """
        from ch09_matmul import Tiling, matmul, partials
        a, b = torch.randn(100, 256).to(torch.{dtype}), torch.randn(256, 72).to(torch.{dtype})
        ref = a.float() @ b.float()
        for t in (Tiling(bm=32, bn=32, bk=32), Tiling(bm=16, bn=32, bk=32, group_m=3),
                  Tiling(bm=32, bn=16, bk=32, group_m=2, split_k=4)):
            c = torch.full((100, 72), float("nan")).to(torch.{dtype})
            matmul(a, b, c, t, partials(a, b, t))
            assert (c.float() - ref).abs().max() <= 2e-3 * ref.abs().max(), t
        try:
            matmul(a, b, c, Tiling(bm=32, bn=32, bk=32, split_k=3), None)
            raise AssertionError("K not divisible by split_k * bk was accepted")
        except ValueError:
            pass
    """


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_matmul_with_group_order_and_split_k(dtype: str, interpreted: dict) -> None:
    assert_ran(interpreted, f"matmul[{dtype}]")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """The scripts above, each with ch09 on its path and torch seeded, in forks of one process that imported
    torch and triton once for the four (tests/ci_triton_scripts.py)."""
    scripts = {"rmsnorm": RMSNORM, "softmax": SOFTMAX} | {
        f"matmul[{dtype}]": MATMUL.format(dtype=dtype) for dtype in ("float16", "float32")}
    prelude = "import sys, torch\nsys.path.insert(0, 'ch09')\ntorch.manual_seed(0)\n"
    return run_scripts({name: prelude + textwrap.dedent(code) for name, code in scripts.items()}, timeout=600)


def compile_sm90(fn, signature: dict[str, str], constexprs: dict[str, int], **options: int):
    import triton
    from triton.backends.compiler import GPUTarget

    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def test_kernels_compile_for_sm90_in_bf16() -> None:
    from aisp.harness.loader import import_module_at

    mm = import_module_at(REPO / "ch09" / "ch09_matmul.py")
    rows = import_module_at(REPO / "ch09" / "ch09_rows.py")
    ints = ["M", "N", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cs", "stride_cm"]
    sig = {**dict.fromkeys(["a_ptr", "b_ptr", "c_ptr"], "*bf16"), **dict.fromkeys(ints, "i32"),
           **dict.fromkeys(["K_SPLIT", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"], "constexpr")}
    sizes = {"K_SPLIT": 8192, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}
    gemm = compile_sm90(mm.matmul_kernel, sig, sizes, num_warps=8, num_stages=3)
    assert "wgmma" in gemm.asm["ptx"]  # Triton lowers tl.dot to Hopper's warpgroup MMA
    compile_sm90(mm.sum_splits_kernel, {"parts_ptr": "*fp32", "c_ptr": "*bf16", "NUMEL": "i32",
                                        "SPLIT_K": "constexpr", "BLOCK": "constexpr"}, {"SPLIT_K": 8, "BLOCK": 1024})
    compile_sm90(rows.rmsnorm_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "eps": "fp32",
                                       "DIM": "constexpr", "BLOCK": "constexpr"}, {"DIM": 4096, "BLOCK": 4096},
                 num_warps=16)
    compile_sm90(rows.softmax_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "COLS": "constexpr",
                                       "BLOCK": "constexpr"}, {"COLS": 4096, "BLOCK": 2048}, num_warps=8)
