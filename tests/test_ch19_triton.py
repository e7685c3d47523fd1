"""Chapter 19's Triton kernels under the interpreter (TRITON_INTERPRET=1, CPU tensors), each in a
fresh fork of one process that imported Triton with the variable set (tests/ci_triton_scripts.py).

The interpreter rounds to fp8 wrongly (7.77 -> 4.0) and multiplies bf16 tiles wrongly, so the kernels
store into the output pointer's dtype and multiply in the activation's: here fp32 buffers check the
indexing, the transpose, the amax, the nibble layout and the group scales exactly; the fp8 rounding
and the bf16 multiply are the hardware's, checked by tests/test_ch19_gpu.py."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ci_triton_scripts import assert_ran, run_scripts

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

MOE = """
import torch
from optimized_fp8_moe_triton import grouped_gemm, tile_table
counts = [37, 0, 70, 13]  # an empty expert, blocks that end mid-tile, the last one past the tensor's end
a, b = torch.randn(120, 64).round(), torch.randn(4, 96, 64).round()
sa, sb = torch.rand(120) + 0.5, torch.rand(4, 96) + 0.5
c = grouped_gemm(a, sa, b, sb, tile_table(counts, a.device, 16), torch.float32, tile=(16, 32, 32))
want = torch.cat([(r @ b[e].t()) * s[:, None] * sb[e] for e, (r, s) in
                  enumerate(zip(torch.split(a, counts), torch.split(sa, counts)))])
assert torch.allclose(c, want, rtol=1e-5, atol=1e-3), (c - want).abs().max()
expert, row0, row1 = tile_table(counts, a.device, 16).tolist()
assert expert == [0, 0, 0, 2, 2, 2, 2, 2, 3] and row0[3] == 37 and row0[-1] == 107 and row1[-1] == 120
"""

MOE_COMBINE = """
import torch
from optimized_fp8_moe_fused_combine import grouped_gemm_combine
from optimized_fp8_moe_triton import tile_table
counts = [37, 0, 70, 13]
a, b = torch.randn(120, 64).round(), torch.randn(4, 96, 64).round()
sa, sb, gate = torch.rand(120) + 0.5, torch.rand(4, 96) + 0.5, torch.rand(120)
token = torch.randperm(120) % 60  # every token twice (top_k = 2), in expert-sorted order
out = grouped_gemm_combine(a, sa, b, sb, tile_table(counts, a.device, 16), token, gate, 64, tile=(16, 32, 32))
y = torch.cat([(r @ b[e].t()) * s[:, None] * sb[e] for e, (r, s) in
               enumerate(zip(torch.split(a, counts), torch.split(sa, counts)))])
want = torch.zeros(64, 96).index_add_(0, token, y * gate[:, None])
assert torch.allclose(out, want, rtol=1e-5, atol=1e-3), (out - want).abs().max()
assert out[60:].abs().max() == 0  # tokens no row routes to stay zero
"""

MOE_PASSES = """
import torch, torch.nn.functional as F
from optimized_fp8_moe_fused_passes import combine_rows, gather_quantize, gelu_quantize
tokens, top_k, n = 24, 2, 96  # rows narrower than their power-of-two block: masked columns
x = (torch.randn(tokens, n) * 3).bfloat16()
x[5, 7] = -50.0  # a negative amax
order = torch.randperm(tokens * top_k)
q, s, pos = gather_quantize(x, order, top_k, torch.float32)
rows = x[order // top_k].float()
amax = rows.abs().amax(1)
assert torch.allclose(s, amax / 448.0, rtol=1e-6), (s, amax)
assert torch.allclose(q, rows * (448.0 / amax)[:, None], rtol=1e-5, atol=1e-5)
assert torch.equal(pos[order], torch.arange(tokens * top_k, dtype=torch.int32)), "pos is not order's inverse"
h, gate = (torch.randn(tokens * top_k, n) * 2).bfloat16(), torch.rand(tokens * top_k)
q, s = gelu_quantize(h, gate, torch.float32)
g = F.gelu(h.float())
amax = g.abs().amax(1)
assert torch.allclose(s, amax / 448.0 * gate, rtol=1e-5), (s, amax / 448.0 * gate)
assert torch.allclose(q, g * (448.0 / amax)[:, None], rtol=1e-4, atol=1e-4), "not the exact-erf GELU"
y = torch.randn(tokens * top_k, n).bfloat16()
out = combine_rows(y, pos, top_k, torch.float32)
want = torch.zeros(tokens, n).index_add_(0, order // top_k, y.float())
assert torch.allclose(out, want, rtol=1e-6, atol=1e-6), (out - want).abs().max()
"""

MOE_ROUTE = """
import torch
from aisp.kits.moe_schedule import device_route
torch.manual_seed(0)
# rows not a multiple of the chunk (a short last chunk), one chunk only, 8 chunks; empty experts
for rows, experts, bm, chunk, empty in ((100, 4, 16, 16, [1]), (37, 3, 8, 64, [0]), (256, 8, 16, 32, [0, 5, 7])):
    e = torch.randint(0, experts, (rows,))
    for x in empty:
        e[e == x] = (x + 1) % experts if (x + 1) % experts not in empty else 2
    assert all(int((e == x).sum()) == 0 for x in empty)
    gates = torch.rand(rows)
    order, sgate, sched = device_route(e, gates, experts, bm, chunk)
    want = torch.argsort(e, stable=True)
    assert torch.equal(order.long(), want), "not argsort's stable order"
    assert torch.equal(sgate, gates[want])
    counts = torch.bincount(e, minlength=experts)
    tiles = (counts + bm - 1) // bm
    row_start = [0] + counts.cumsum(0).tolist()
    tile_start = [0] + tiles.cumsum(0).tolist()
    assert sched.tolist() == [row_start, tile_start], (sched.tolist(), row_start, tile_start)
    assert all(tile_start[x] == tile_start[x + 1] for x in empty)  # an empty expert has no blocks
"""

MOE_SCHEDULE = """
import torch, triton, triton.language as tl
from aisp.kits.moe_schedule import device_route, sched_blocks, sched_tile
from optimized_fp8_moe_triton import tile_of, tile_table

@triton.jit
def walk(sched_ptr, table_ptr, host_blocks, out_ptr, ref_ptr, col_tiles, programs, E1, BM: tl.constexpr,
         BN: tl.constexpr):
    tile_end, blocks = sched_blocks(sched_ptr, E1, 64)  # as _grouped_gemm_sched
    t = tl.program_id(0)
    while t < blocks * col_tiles:  # the GEMM's walk: a program past the last tile exits at once
        e, row0, row1, col0 = sched_tile(t, blocks, col_tiles, tile_end, sched_ptr, E1, BM, BN, 8)
        tl.store(out_ptr + 5 * t + tl.arange(0, 8), tl.where(tl.arange(0, 8) == 0, e, tl.where(
            tl.arange(0, 8) == 1, row0, tl.where(tl.arange(0, 8) == 2, row1, tl.where(tl.arange(0, 8) == 3, col0,
            tl.program_id(0))))), mask=tl.arange(0, 8) < 5)
        e, row0, row1, col0 = tile_of(t, host_blocks, col_tiles, table_ptr, BN, 8)
        tl.store(ref_ptr + 4 * t + tl.arange(0, 4), tl.where(tl.arange(0, 4) == 0, e, tl.where(
            tl.arange(0, 4) == 1, row0, tl.where(tl.arange(0, 4) == 2, row1, col0))))
        t += programs

# blocks ending mid-tile and an empty expert; empty first and last experts with fewer tiles than programs
# (programs exit); one expert holding every row; more than GROUP (8) blocks: a short last group
for counts, bm, col_tiles, programs in (([37, 0, 70, 13], 16, 3, 4), ([0, 5, 0, 3, 0], 16, 1, 4),
                                        ([0, 0, 40, 0], 16, 2, 3), ([130, 7, 200, 1], 16, 2, 5)):
    experts = len(counts)
    e = torch.repeat_interleave(torch.arange(experts), torch.tensor(counts))
    e = e[torch.randperm(e.numel())]
    _, _, sched = device_route(e, torch.rand(e.numel()), experts, bm, 32)
    table = tile_table(counts, e.device, bm)
    tiles = table.shape[1] * col_tiles
    out, ref = torch.full((tiles + 8, 5), -1, dtype=torch.int32), torch.full((tiles + 8, 4), -1, dtype=torch.int32)
    walk[(programs,)](sched, table, table.shape[1], out, ref, col_tiles, programs, experts + 1, BM=bm, BN=32)
    assert int(sched[1, -1]) == table.shape[1], (sched, table)
    assert torch.equal(out[:tiles, :4], ref[:tiles]), (counts, out, ref)  # tile_of's map over the host table
    assert (out[tiles:] == -1).all(), "a tile past the last one was walked"
    assert torch.equal(out[:tiles, 4], torch.arange(tiles, dtype=torch.int32) % programs)  # program t % programs
    covered = sorted((r, c) for x, r0, r1, c, _ in out[:tiles].tolist() for r in range(r0, min(r0 + bm, r1)))
    assert covered == sorted((r, c * 32) for r in range(sum(counts)) for c in range(col_tiles)), "a row missed or twice"
"""

MOE_SCHEDULE_GEMM = """
import torch
from aisp.kits.moe_schedule import device_route
from ch19_moe_schedule import grouped_gemm_sched
for counts in ([37, 0, 70, 13], [0, 5, 0, 3]):  # blocks ending mid-tile, empty experts, fewer tiles than programs
    rows = sum(counts)
    a, b = torch.randn(rows, 64).round(), torch.randn(4, 96, 64).round()
    sa, sb = torch.rand(rows) + 0.5, torch.rand(4, 96) + 0.5
    _, _, sched = device_route(torch.repeat_interleave(torch.arange(4), torch.tensor(counts)), torch.rand(rows), 4, 16, 32)
    c = grouped_gemm_sched(a, sa, b, sb, sched, torch.float32, tile=(16, 32, 32))
    want = torch.cat([(r @ b[e].t()) * s[:, None] * sb[e] for e, (r, s) in
                      enumerate(zip(torch.split(a, counts), torch.split(sa, counts)))])
    assert torch.allclose(c, want, rtol=1e-5, atol=1e-3), (c - want).abs().max()
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
import optimized_w4a16_gemm_prmt as prmt
y = prmt.w4a16_matmul(x, packed, scale)
assert ((y - ref).norm() / ref.norm()) < 1e-5, ("prmt variant", (y - ref).norm() / ref.norm())

@triton.jit
def decode(p_ptr, o_ptr):
    r = tl.arange(0, 16)
    tl.store(o_ptr + r, codes_plus_128(tl.load(p_ptr + r) & 0xF, tl.bfloat16))

out = torch.empty(16, dtype=torch.bfloat16)
decode[(1,)](torch.arange(16, dtype=torch.uint8) * 17, out)
assert torch.equal(out.float(), torch.arange(16.0) + 128), out
"""


SCRIPTS = {"cast": CAST, "cast_persistent": CAST_PERSISTENT, "moe": MOE, "moe_combine": MOE_COMBINE,
           "moe_passes": MOE_PASSES, "moe_route": MOE_ROUTE, "moe_schedule": MOE_SCHEDULE,
           "moe_schedule_gemm": MOE_SCHEDULE_GEMM, "w4": W4}


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """Every script above under the interpreter, ch19 on the path, in forks of one process (one import of
    torch and triton for the nine; tests/ci_triton_scripts.py)."""
    return run_scripts({name: textwrap.dedent(script) for name, script in SCRIPTS.items()}, (str(ROOT / "ch19"),),
                       timeout=300)


def test_cast_transpose_kernel_indexing_amax_and_scale(interpreted: dict) -> None:
    assert_ran(interpreted, "cast")


def test_persistent_cast_transpose_walks_every_tile_and_finds_the_amax(interpreted: dict) -> None:
    assert_ran(interpreted, "cast_persistent")


def test_grouped_fp8_gemm_kernel_covers_every_expert_block(interpreted: dict) -> None:
    assert_ran(interpreted, "moe")


def test_fused_combine_adds_every_gated_row_into_its_token(interpreted: dict) -> None:
    assert_ran(interpreted, "moe_combine")


def test_fused_passes_gather_quantize_gelu_and_combine_rows(interpreted: dict) -> None:
    assert_ran(interpreted, "moe_passes")


def test_device_route_is_argsorts_stable_order_and_writes_the_schedule(interpreted: dict) -> None:
    assert_ran(interpreted, "moe_route")


def test_device_schedule_walks_tile_ofs_tiles_and_stops_past_the_last(interpreted: dict) -> None:
    assert_ran(interpreted, "moe_schedule")


def test_grouped_gemm_on_the_device_schedule_covers_every_expert_block(interpreted: dict) -> None:
    assert_ran(interpreted, "moe_schedule_gemm")


def test_w4a16_kernel_decodes_nibbles_and_group_scales(interpreted: dict) -> None:
    assert_ran(interpreted, "w4")


def compile_sm90(module: str, kernel: str, sig: dict[str, str], consts: dict[str, object], num_warps: int,
                 num_stages: int = 3, autotuned: bool = False):
    """``module.kernel`` compiled for sm_90 on this machine (no GPU), 16-divisible pointers and sizes
    as the GPU launch specializes them."""
    import triton
    from triton.backends.compiler import GPUTarget

    sys.path[:0] = [str(ROOT / "ch19")]
    try:
        fn = getattr(importlib.import_module(module), kernel)
        fn = fn.fn if autotuned else fn
    finally:
        del sys.path[0]
    sig = sig | dict.fromkeys(consts, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t[0] in "*i"}
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


def bf16_value(bits: int) -> float:
    import torch

    return float(torch.tensor([bits - 65536 if bits >= 32768 else bits], dtype=torch.int16).view(torch.bfloat16))


def bf16_bits(value: float) -> int:
    import torch

    return int(torch.tensor([value]).bfloat16().view(torch.int16)) & 0xFFFF


def emulate_ptx(asm: str, word: int) -> list[float]:
    """The four bf16 values the decode's inline PTX leaves in $0 and $1 for input word $2, emulated
    instruction by instruction (and, shr, mov, prmt, fma.rn.bf16x2: its operands here are exact)."""
    import re

    regs: dict[str, int] = {"$2": word}

    def val(op: str) -> int:
        return int(op, 16) if op.startswith("0x") else int(op) if op.isdigit() else regs[op]

    for op, args in re.findall(r"^\s*([a-z0-9.]+)\s+([^;]+);", asm, flags=re.M):
        d, *a = [x.strip() for x in args.split(",")]
        if op == "and.b32":
            regs[d] = val(a[0]) & val(a[1])
        elif op == "shr.u32":
            regs[d] = val(a[0]) >> val(a[1])
        elif op == "mov.b32":
            regs[d] = val(a[0])
        elif op == "prmt.b32":  # byte i of d = byte (selector nibble i) of {a[1]:a[0]}
            pool = (val(a[1]) << 32 | val(a[0])).to_bytes(8, "little")
            regs[d] = int.from_bytes(bytes(pool[(val(a[2]) >> 4 * i) & 7] for i in range(4)), "little")
        elif op == "fma.rn.bf16x2":
            x, y, z = ([bf16_value((val(r) >> sh) & 0xFFFF) for sh in (0, 16)] for r in a)
            regs[d] = bf16_bits(x[0] * y[0] + z[0]) | bf16_bits(x[1] * y[1] + z[1]) << 16
        elif op != ".reg":
            raise AssertionError(f"unknown PTX op {op}")
    return [bf16_value((regs[r] >> sh) & 0xFFFF) for r in ("$0", "$1") for sh in (0, 16)]


def test_w4a16_prmt_decode_ptx_gives_code_minus_8_for_every_byte() -> None:
    """The inline PTX of optimized_w4a16_gemm_prmt, emulated on a CPU: byte i of the input word -> element
    i of the output (low and high nibbles), value code - 8, for all 256 byte values."""
    sys.path[:0] = [str(ROOT / "ch19"), str(ROOT)]
    try:
        prmt = __import__("optimized_w4a16_gemm_prmt")
    finally:
        del sys.path[:2]
    for first in range(0, 256, 4):
        data = [first, first + 1, first + 2, first + 3]
        word = int.from_bytes(bytes(data), "little")
        assert emulate_ptx(prmt.LOW.value, word) == [float((b & 15) - 8) for b in data]
        assert emulate_ptx(prmt.HIGH.value, word) == [float((b >> 4) - 8) for b in data]


def test_w4a16_prmt_sm90_decodes_with_fewer_instructions_and_no_spills() -> None:
    """Same tile and warps as the reference kernel: the decode's integer/move instructions (PRMT, LOP3,
    SHF, IMAD.MOV) in the sm_90 SASS drop by more than 2x, packed bf16x2 FMAs do the offset, no spills."""
    import triton

    ptrs = {"x_ptr": "*bf16", "p_ptr": "*u8", "s_ptr": "*bf16", "part_ptr": "*fp32"} | dict.fromkeys(
        ("M", "N", "K", "GROUPS"), "i32")
    consts = {"HALF": 8192, "SPLIT": 4, "BM": 16, "BN": 128, "BK": 128, "GROUP": 128}
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    counts = []
    for module, kernel, extra in (("optimized_w4a16_gemm", "_w4a16_gemm", {}),
                                  ("optimized_w4a16_gemm_prmt", "_w4a16_prmt", {"ASM": True})):
        sys.path[:0] = [str(ROOT)]
        try:
            k = compile_sm90(module, kernel, ptrs, consts | extra, num_warps=4, autotuned=bool(extra))
        finally:
            del sys.path[0]
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            sass = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True, check=True).stdout
        counts.append(sum(sass.count(f" {op}") for op in ("PRMT ", "LOP3.LUT ", "SHF.", "IMAD.MOV")))
        res = resources(k)
        assert res["STACK"] == res["LOCAL"] == 0, (module, res)
    assert "fma.rn.bf16x2" in k.asm["ptx"] and "prmt.b32" in k.asm["ptx"]
    assert counts[1] * 2 < counts[0], counts


def test_grouped_fp8_gemm_sm90_runs_fp8_wgmma_fed_by_tma() -> None:
    """The larger autotune config (128 x 256 x 128, 8 warps, 4 stages) fits one SM (<= 227 KB shared),
    multiplies with fp8 wgmma (e4m3 x e4m3, 64 x 256 x 32) fed by TMA bulk copies, and does not spill."""
    sig = {"a_desc": "tensordesc<fp8e4nv[128, 128]>", "sa_ptr": "*fp32", "b_desc": "tensordesc<fp8e4nv[256, 128]>",
           "sb_ptr": "*fp32", "c_ptr": "*bf16", "table_ptr": "*i32", "blocks": "i32", "N": "i32", "K": "constexpr",
           "programs": "i32"}  # in the kernel's argument order
    sys.path[:0] = [str(ROOT)]
    try:
        k = compile_sm90("optimized_fp8_moe_triton", "_grouped_gemm", sig, {"K": 4096, "BM": 128, "BN": 256, "BK": 128,
                          "GROUP": 8}, num_warps=8, num_stages=4, autotuned=True)
    finally:
        del sys.path[0]
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= 227 * 1024 and "ttng.warp_group_dot" in k.asm["ttgir"]
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" not in ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    res = resources(k)
    assert res["STACK"] == res["LOCAL"] == 0, res


def test_fused_combine_sm90_keeps_the_grouped_gemm_and_adds_with_fp32_reductions() -> None:
    """The fused-combine kernel (larger autotune config) is the same fp8 wgmma GEMM fed by TMA, fits one
    SM, does not spill, and ends in fp32 global reductions instead of a bf16 store."""
    sig = {"a_desc": "tensordesc<fp8e4nv[128, 128]>", "sa_ptr": "*fp32", "b_desc": "tensordesc<fp8e4nv[256, 128]>",
           "sb_ptr": "*fp32", "out_ptr": "*fp32", "table_ptr": "*i32", "token_ptr": "*i64", "gate_ptr": "*fp32",
           "blocks": "i32", "N": "i32", "K": "constexpr", "programs": "i32"}  # in the kernel's argument order
    sys.path[:0] = [str(ROOT)]
    try:
        k = compile_sm90("optimized_fp8_moe_fused_combine", "_grouped_gemm_combine", sig,
                         {"K": 8192, "BM": 128, "BN": 256, "BK": 128, "GROUP": 8}, num_warps=8, num_stages=4,
                         autotuned=True)
    finally:
        del sys.path[0]
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= 227 * 1024 and "cp.async.bulk.tensor.2d" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    assert re.search(r"(atom|red)\.global\.\S*add(\.v[24])?\.f32", ptx), "no fp32 global reduction"
    assert "st.global" not in ptx  # the expert outputs are never stored
    res = resources(k)
    print(res)
    assert res["STACK"] == res["LOCAL"] == 0, res


@pytest.mark.parametrize(("kernel", "sig", "consts", "warps", "loads"), [
    ("_gather_quantize", {"x_ptr": "*bf16", "order_ptr": "*i64", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32", "pos_ptr": "*i32"},
     {"N": 4096, "TOP_K": 2, "BLOCK": 4096, "FP8_MAX": 448.0}, 4, 4),
    ("_gelu_quantize", {"h_ptr": "*bf16", "gate_ptr": "*fp32", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
     {"N": 8192, "BLOCK": 8192, "FP8_MAX": 448.0}, 8, 4),
    ("_combine", {"y_ptr": "*bf16", "pos_ptr": "*i32", "out_ptr": "*bf16"}, {"N": 4096, "TOP_K": 2, "BLOCK": 4096}, 4, 8)],
    ids=["gather_quantize", "gelu_quantize", "combine"])
def test_fused_passes_sm90_rows_move_in_16_byte_accesses_once(kernel: str, sig: dict, consts: dict, warps: int,
                                                              loads: int) -> None:
    """At the pair's widths each thread holds 32 elements of its row: four 16-byte bf16 loads per row read
    (once: no second pass over the row), 16-byte stores, e4m3 by the paired hardware convert, no spills;
    the GELU's exp2 runs once per element (the compiled pass evaluated GELU twice, for the amax and the cast)."""
    sys.path[:0] = [str(ROOT)]
    try:
        k = compile_sm90("optimized_fp8_moe_fused_passes", kernel, sig, consts, num_warps=warps, num_stages=1)
    finally:
        del sys.path[0]
    ptx = k.asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == loads and "st.global.v4.b32" in ptx
    assert kernel == "_combine" or ptx.count("cvt.rn.satfinite.e4m3x2.f32") == 16
    assert kernel != "_gelu_quantize" or ptx.count("ex2.approx") == 32
    res = resources(k)
    assert res["STACK"] == res["LOCAL"] == 0, res


def test_device_schedule_sm90_gemm_keeps_wgmma_and_tma_and_routing_does_not_spill() -> None:
    """The schedule-reading grouped GEMM (larger autotune config) is the same fp8 wgmma loop fed by TMA, fits
    one SM and does not spill (186 registers against the table kernel's 183); the routing kernels do not spill."""
    sig = {"a_desc": "tensordesc<fp8e4nv[128, 128]>", "sa_ptr": "*fp32", "b_desc": "tensordesc<fp8e4nv[256, 128]>",
           "sb_ptr": "*fp32", "c_ptr": "*bf16", "sched_ptr": "*i32", "E1": "i32", "N": "i32", "K": "constexpr",
           "programs": "i32"}  # in the kernel's argument order
    sys.path[:0] = [str(ROOT)]
    try:
        k = compile_sm90("ch19_moe_schedule", "_grouped_gemm_sched", sig, {"K": 4096, "BM": 128, "BN": 256, "BK": 128,
                         "GROUP": 8, "MAX_E": 64}, num_warps=8, num_stages=4, autotuned=True)
        route = [compile_sm90("aisp.kits.moe_schedule", name, s, c, num_warps=4, num_stages=1) for name, s, c in (
            ("_count", {"expert_ptr": "*i64", "part_ptr": "*i32", "ROWS": "i32"}, {"EP2": 8, "CHUNK": 1024}),
            ("_sort", {"expert_ptr": "*i64", "gate_ptr": "*fp32", "part_ptr": "*i32", "order_ptr": "*i32",
                       "sgate_ptr": "*fp32", "sched_ptr": "*i32", "ROWS": "i32"},
             {"E": 8, "EP2": 8, "CHUNK": 1024, "PARTS": 32, "BM": 128}))]
    finally:
        del sys.path[0]
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= 227 * 1024 and "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" not in ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    for kernel in (k, *route):
        res = resources(kernel)
        assert res["STACK"] == res["LOCAL"] == 0, res
