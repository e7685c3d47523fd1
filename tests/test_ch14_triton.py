"""Chapter 14's Triton kernels on a CPU through the Triton interpreter (TRITON_INTERPRET=1), each
in a fresh process (the variable must be set before triton is imported), against PyTorch.

The interpreter (Triton 3.6, NumPy 2) truncates fp32 to bf16 instead of rounding, multiplies bf16
tiles wrongly in tl.dot, rounds some values to e4m3 wrongly at binade edges, and cannot take a
runtime loop bound, so the GEMMs run here in fp16/fp32 with pre-quantized fp8 operands; the GPU
tests (test_ch14_gpu.py) check the bf16 and fp8 paths themselves."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
REPO = Path(__file__).resolve().parents[1]


def interpret(code: str) -> None:
    """Run ``code`` with ch14 importable and the Triton interpreter on; fail with its output."""
    script = "import sys, torch\nsys.path.insert(0, 'ch14')\ntorch.manual_seed(0)\n" + textwrap.dedent(code)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_fused_add_norm_gelu_matches_eager_on_ragged_rows() -> None:
    interpret("""
        import torch.nn.functional as F
        from optimized_triton_fused_layernorm import add_norm_gelu
        x, r = torch.randn(7, 300).bfloat16(), torch.randn(7, 300).bfloat16()
        w, b = torch.randn(300).bfloat16(), torch.randn(300).bfloat16()
        ref = F.gelu(F.layer_norm(x + r, (300,), w, b, 1e-5), approximate="tanh").float()
        out = add_norm_gelu(x, r, w, b, 1e-5).float()
        assert (out - ref).abs().max() <= 2 ** -5 * ref.abs().max(), (out - ref).abs().max()
        assert (out - ref).norm() / ref.norm() < 1.5e-2  # the interpreter truncates to bf16 (GPU: rounds)
    """)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_gemm_matches_a_loop_with_uneven_and_empty_groups(dtype: str) -> None:
    interpret(f"""
        from optimized_triton_grouped_gemm import Tiling, block_table, grouped_mm
        rows, dt = [5, 40, 17, 0, 33, 16], torch.{dtype}
        a, b = torch.randn(sum(rows), 64).to(dt), torch.randn(len(rows), 64, 32).to(dt)
        out = torch.full((sum(rows), 32), float("nan")).to(dt)
        grouped_mm(a, b, block_table(rows, 16, a.device), out, programs=3, tiling=Tiling(bm=16, bn=16, bk=16))
        starts = [sum(rows[:g]) for g in range(len(rows))]
        ref = torch.cat([a[s:s + n].float() @ b[g].float() for g, (s, n) in enumerate(zip(starts, rows))])
        assert (out.float() - ref).abs().max() < 2e-2 * ref.abs().max()
        try:
            grouped_mm(a, b[:, :, :24], block_table(rows, 16, a.device), out, 3, Tiling(bm=16, bn=16, bk=16))
            raise AssertionError("N not a multiple of the tile width was accepted")
        except ValueError:
            pass
    """)


def test_fp8_quantization_scales_and_scaled_gemm() -> None:
    interpret("""
        from optimized_triton_fp8_gemm import Tiling, quantize_rows, quantize_rows_reference, scaled_mm
        x = torch.randn(64, 96).bfloat16() * torch.logspace(-2, 2, 64)[:, None].bfloat16()
        q, s = quantize_rows(x)
        q_ref, s_ref = quantize_rows_reference(x)
        assert torch.equal(s, s_ref)
        assert (q.float() == q_ref.float()).float().mean() > 0.9  # the rest: the interpreter's e4m3 rounding
        assert q.float().abs().max() <= 448
        w = torch.randn(48, 96).bfloat16()
        w_q, w_s = quantize_rows_reference(w)
        out = scaled_mm(q_ref, s_ref, w_q, w_s, Tiling(bm=16, bn=16, bk=32, group_m=3)).float()
        ref = (q_ref.float() * s_ref[:, None]) @ (w_q.float() * w_s[:, None]).t()
        assert ((out - ref).abs() <= 2 ** -7 * ref.abs() + 1e-3 * ref.abs().max()).all()
        exact = x.float() @ w.float().t()
        assert (out - exact).norm() / exact.norm() < 0.08  # e4m3 rounding of both operands
    """)


def test_relu_squared_kernel() -> None:
    interpret("""
        from baseline_custom_op_graph_break import launch_relu_squared
        x = torch.randn(5000).bfloat16()
        ref = torch.relu(x.float()) ** 2
        assert ((launch_relu_squared(x).float() - ref).abs() <= 2 ** -7 * ref).all()  # one bf16 rounding
    """)


def test_fused_add_norm_gelu_compiles_for_sm90() -> None:
    """Triton's real compiler front end and back end, no GPU needed: the interpreter above accepts
    what the compiler rejects (the first H200 run failed on a non-constexpr global constant)."""
    import triton
    from triton.backends.compiler import GPUTarget

    from aisp.harness.loader import import_module_at

    _add_norm_gelu = import_module_at(REPO / "ch14" / "optimized_triton_fused_layernorm.py")._add_norm_gelu
    signature = {**dict.fromkeys(["x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr"], "*bf16"), "dim": "i32",
                 "eps": "fp32", "BLOCK": "constexpr"}
    source = triton.compiler.ASTSource(fn=_add_norm_gelu, signature=signature, constexprs={"BLOCK": 4096})
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    assert "cubin" in kernel.asm and "ld.global" in kernel.asm["ptx"]
