"""Chapter 19's Triton kernels under the interpreter (TRITON_INTERPRET=1, CPU tensors), each in a
fresh process so the variable is set before Triton is imported.

The interpreter rounds to fp8 wrongly (7.77 -> 4.0) and multiplies bf16 tiles wrongly, so the kernels
store into the output pointer's dtype and multiply in the activation's: here fp32 buffers check the
indexing, the transpose, the amax, the nibble layout and the group scales exactly; the fp8 rounding
and the bf16 multiply are the hardware's, checked by tests/test_ch19_gpu.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]

CAST = """
import torch
from ch19_cast import cast_transpose
x = (torch.randn(256, 384) * 3).bfloat16()
history = torch.tensor([2.0, 5.0, 4.0, 1.0])
amax = torch.zeros(1)
q, qt, scale = cast_transpose(x, history, torch.float32, 448.0, amax)
want = (x.float() * (448.0 / 5.0)).clamp(-448, 448)
assert torch.allclose(q, want, rtol=1e-6), (q - want).abs().max()
assert torch.equal(qt, q.t()), "transposed copy differs"
assert float(amax) == float(x.float().abs().max()), (amax, x.abs().max())
assert abs(float(scale) - 5.0 / 448.0) < 1e-9, scale
"""

CAST_PERSISTENT = """
import torch
from ch19_cast import cast_transpose_persistent
x = (torch.randn(256, 384) * 3).bfloat16()
x[37, 250] = -40.0  # the amax sits in one tile, negative: the sign-cleared bit max must find it
history = torch.tensor([2.0, 5.0, 4.0, 1.0])
amax = torch.zeros(1)
q, qt, scale = cast_transpose_persistent(x, history, torch.float32, 448.0, amax)  # 12 tiles, 3 programs
want = (x.float() * (448.0 / 5.0)).clamp(-448, 448)
assert torch.allclose(q, want, rtol=1e-6), (q - want).abs().max()
assert torch.equal(qt, q.t()), "transposed copy differs"
assert float(amax) == 40.0, amax
assert abs(float(scale) - 5.0 / 448.0) < 1e-9, scale
"""

W4 = """
import torch, triton, triton.language as tl
from ch19_w4 import quantize_w4
from optimized_w4a16_gemm import codes_plus_128, w4a16_matmul
w = torch.randn(256, 1024) * 0.02
packed, scale = quantize_w4(w)
codes = torch.cat([packed & 0xF, packed >> 4], 1).float() - 8
exact = (codes.reshape(256, 8, 128) * scale.float()[..., None]).reshape(256, 1024)
x = torch.randn(5, 1024).bfloat16().float()
y = w4a16_matmul(x, packed, scale)
ref = x @ exact.t()
assert ((y - ref).norm() / ref.norm()) < 1e-5, ((y - ref).norm() / ref.norm())

@triton.jit
def decode(p_ptr, o_ptr):
    r = tl.arange(0, 16)
    tl.store(o_ptr + r, codes_plus_128(tl.load(p_ptr + r) & 0xF, tl.bfloat16))

out = torch.empty(16, dtype=torch.bfloat16)
decode[(1,)](torch.arange(16, dtype=torch.uint8) * 17, out)
assert torch.equal(out.float(), torch.arange(16.0) + 128), out
"""


def run_interpreted(script: str) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{ROOT / 'ch19'}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_cast_transpose_kernel_indexing_amax_and_scale() -> None:
    run_interpreted(CAST)


def test_persistent_cast_transpose_walks_every_tile_and_finds_the_amax() -> None:
    run_interpreted(CAST_PERSISTENT)


def test_w4a16_kernel_decodes_nibbles_and_group_scales() -> None:
    run_interpreted(W4)


def compile_sm90(module: str, kernel: str, sig: dict[str, str], consts: dict[str, object], num_warps: int,
                 num_stages: int = 3):
    """``module.kernel`` compiled for sm_90 on this machine (no GPU), 16-divisible pointers and sizes
    as the GPU launch specializes them."""
    import triton
    from triton.backends.compiler import GPUTarget

    sys.path[:0] = [str(ROOT / "ch19")]
    try:
        fn = getattr(__import__(module), kernel)
    finally:
        del sys.path[0]
    sig = sig | dict.fromkeys(consts, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t != "constexpr"}
    return triton.compile(triton.compiler.ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def resources(kernel) -> dict[str, int]:
    """REG, STACK, LOCAL, SHARED of a kernel compiled for sm_90, read from its cubin by Triton's cuobjdump."""
    import re
    import tempfile

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in re.findall(r"(REG|STACK|LOCAL|SHARED):(\d+)", out)}


def test_w4a16_sm90_loop_streams_weights_without_reductions() -> None:
    ptrs = {"x_ptr": "*bf16", "p_ptr": "*u8", "s_ptr": "*bf16", "part_ptr": "*fp32"}
    consts = {"HALF": 8192, "SPLIT": 4, "BM": 16, "BN": 128, "BK": 128, "GROUP": 128}
    k = compile_sm90("optimized_w4a16_gemm", "_w4a16_gemm", ptrs | dict.fromkeys(("M", "N", "K", "GROUPS"), "i32"),
                     consts, num_warps=4)
    ttgir, ptx = k.asm["ttgir"], k.asm["ptx"]
    assert "tt.reduce" not in ttgir, "a cross-warp reduction is back in the loop"
    assert "add.bf16x2" in ptx, "the -136 offset is not one packed bf16x2 op per two weights"
    assert ttgir.count("ttg.async_copy_global_to_local") >= 3, "packed weights and x must be cp.async-pipelined"
    assert k.metadata.shared <= 56 * 1024, "more shared memory than 4 programs per SM allow"


def test_cast_transpose_sm90_atomic_has_no_fence_and_16_byte_accesses() -> None:
    ptrs = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "qt_ptr": "*fp8e4nv", "hist_ptr": "*fp32", "amax_ptr": "*fp32",
            "scale_ptr": "*fp32", "M": "i32", "N": "i32"}
    k = compile_sm90("ch19_cast", "_cast_transpose", ptrs, {"FP8_MAX": 448.0, "HIST": 16, "BM": 128, "BN": 128},
                     num_warps=8)
    ptx = k.asm["ptx"]
    assert "atom.global.gpu.relaxed.max" in ptx and "acq_rel" not in ptx and "fence." not in ptx
    assert ptx.count("ld.global.v4.b32") == 8 and ptx.count("st.global.v4.b32") == 8


def test_persistent_cast_transpose_sm90_keeps_loads_in_flight_without_spills() -> None:
    """Two programs of 8 warps per SM (<= 128 registers), 16-byte accesses, the next tiles' loads issued
    before this tile's stores, one relaxed atomic per program, no local memory."""
    ptrs = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "qt_ptr": "*fp8e4nv", "hist_ptr": "*fp32", "amax_ptr": "*fp32",
            "scale_ptr": "*fp32", "M": "i32", "N": "i32"}
    k = compile_sm90("ch19_cast", "_cast_transpose_persistent", ptrs | {"programs": "i32"}, {"FP8_MAX": 448.0, "HIST": 16, "BM": 64,
                     "BN": 128}, num_warps=8, num_stages=1)
    ptx = k.asm["ptx"]
    res = resources(k)
    assert res["REG"] <= 128 and res["STACK"] == res["LOCAL"] == 0, res
    assert ptx.count("atom.global.gpu.relaxed.max") == 1 and "fence." not in ptx
    loop = ptx[ptx.index("ld.global.v4.b32"):]
    assert loop.count("ld.global.v4.b32") == 12 and loop.count("st.global.v4.b32") == 4
    body = ptx[ptx.rindex("ld.global.v4.b32"):]  # the in-loop prefetch comes before the loop's stores
    assert body.count("st.global.v4.b32") == 4
