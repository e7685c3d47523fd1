"""Chapter 7's Triton kernel (noncontiguous_views, fused) without a GPU: strided_row_features matches
the eager row_features of the transposed view under TRITON_INTERPRET=1 (ragged tiles, a running max
that grows across tiles, a row stride wider than the view), and compiles for sm_90 with 128-bit
loads along x's rows and 128-bit stores along the output's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ci_triton_scripts import run_scripts

from aisp.harness.loader import import_module_at

pytest.importorskip("triton")
CH07 = Path(__file__).resolve().parents[1] / "ch07"
INTERPRET = """
import torch
from baseline_noncontiguous_views import row_features
from ch07_views import strided_row_features
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
print("ok", len(cases) + 1)
"""


def test_strided_row_features_matches_eager_in_the_interpreter() -> None:
    done = run_scripts({"interpret": INTERPRET}, path=(str(CH07),), timeout=600)["interpret"]
    assert (done.returncode, done.stdout.split()) == (0, ["ok", "4"]), done.stderr[-3000:]


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
