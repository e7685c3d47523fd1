"""Chapter 7's Triton kernels (noncontiguous_views, fused and one-pass) without a GPU: strided_row_features
and resident_row_features match the eager row_features of the transposed view under TRITON_INTERPRET=1
(ragged tiles, a running max that grows across tiles, a row stride wider than the view, rows not a power
of two, columns not a multiple of the block), and compile for sm_90: the fused one with 128-bit loads
along x's rows and 128-bit stores along the output's, the one-pass one with x held in registers without
a spill, read once, and stored without a shared-memory transpose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from triton_cpu import compile_sm90, fits_sm90

from aisp.harness.loader import import_module_at

pytest.importorskip("triton")
CH07 = Path(__file__).resolve().parents[1] / "ch07"
INTERPRET = """
import torch
from baseline_noncontiguous_views import row_features
from ch07_views import resident_row_features, strided_row_features
torch.manual_seed(0)
cases = [(300, 70, 64, 16), (128, 32, 32, 16), (257, 33, 64, 8)]
for rows, cols, bi, bj in cases:
    x = 3 * torch.randn(rows, cols) + 2
    x[:100, 5] = -1e4  # v-row 5: its max appears only in a later tile
    out = strided_row_features(x, torch.full((cols, rows), float("nan")), block_i=bi, block_j=bj)
    torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)
x = torch.randn(200, 96)[:, 10:74]  # a view: row stride 96, 64 columns
out = strided_row_features(x, torch.full((64, 200), float("nan")), block_i=64, block_j=16)
torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)
for rows, cols, bj, warps in [(300, 70, 4, 4), (256, 32, 4, 2), (129, 33, 2, 4)]:
    x = 3 * torch.randn(rows, cols) + 2
    x[:100, 5] = -1e4
    x[200:, 6] = 50.0  # v-row 6: its max far above its mean
    x[:, 7] += 100.0  # v-row 7: an offset its values share (the mean is taken about the max)
    out = resident_row_features(x, torch.full((cols, rows), float("nan")), block_j=bj, num_warps=warps)
    torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)
out = resident_row_features(x[:, 3:31], torch.full((28, 129), float("nan")), block_j=4, num_warps=4)
torch.testing.assert_close(out, row_features(x[:, 3:31].t()), rtol=1e-5, atol=1e-5)
print("ok", len(cases) + 5)
"""


def test_row_features_kernels_match_eager_in_the_interpreter() -> None:
    path = os.pathsep.join([str(CH07), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", INTERPRET], env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=600, check=False)
    assert (done.returncode, done.stdout.split()) == (0, ["ok", "8"]), done.stderr[-3000:]


def test_strided_row_features_compiles_for_sm90() -> None:
    import triton
    from triton.backends.compiler import GPUTarget

    views = import_module_at(CH07 / "ch07_views.py")
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride_r": "i32", "eps": "fp32",
           **dict.fromkeys(["R", "C", "BLOCK_I", "BLOCK_J"], "constexpr")}
    source = triton.compiler.ASTSource(fn=views.strided_row_features_kernel, signature=sig,
                                       constexprs={"R": 8192, "C": 8192, "BLOCK_I": 256, "BLOCK_J": 16},
                                       attrs={(k,): [["tt.divisibility", 16]] for k in range(3)})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    ptx = compiled.asm["ptx"]
    assert len(re.findall(r"ld\.global(\.\w+)*\.v4\.b32", ptx)) == 16  # 8 per pass: 256 x 16 floats / 128 threads / 4
    assert len(re.findall(r"st\.global(\.\w+)*\.v4\.b32", ptx)) == 8  # the transposed store, 4 floats along x's rows
    assert compiled.metadata.shared <= 16 * 1024


def test_resident_row_features_compiles_for_sm90_without_spills() -> None:
    """The pair's launch (8192 x 8192, 4 columns a program, 16 warps): 64 floats of x a thread stay in
    registers (at most 128 a thread, so one 512-thread program fits the register file, no local memory),
    x is read once (16 128-bit loads a thread), exp runs twice per element (recomputed, not kept), and
    the output is written by 64 scalar stores a thread, warp-coalesced, with no shared-memory transpose
    (shared memory only for the reductions)."""
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride_r": "i32", "stride_oi": "i32",
           "eps": "fp32", "zero": "fp32"}
    consts = {"R": 8192, "C": 8192, "R_PAD": 8192, "BLOCK_J": 4, "MASKED": False}
    compiled = compile_sm90("ch07/ch07_views:resident_row_features_kernel", sig, consts, {"num_warps": 16},
                            divisible=("stride_r",))
    usage = fits_sm90(compiled)
    assert usage["REG"] <= 128, usage
    ptx = compiled.asm["ptx"]
    assert len(re.findall(r"ld\.global(\.\w+)*\.v4\.b32", ptx)) == 16
    assert len(re.findall(r"ld\.global", ptx)) == 16
    assert len(re.findall(r"st\.global(\.\w+)*\.b32", ptx)) == 64 and ".v4" not in "".join(re.findall(r"st\.global\S*", ptx))
    assert len(re.findall(r"ex2\.approx", ptx)) == 128  # 64 elements a thread, exp in both passes
    assert compiled.metadata.shared <= 1024
