"""Chapter 14's Triton kernels on a CPU through the Triton interpreter (TRITON_INTERPRET=1), each
in a fresh fork of one process that imported triton with the variable set (it must be set before
triton is imported: tests/ci_triton_scripts.py), against PyTorch.

The interpreter (Triton 3.6, NumPy 2) truncates fp32 to bf16 instead of rounding, multiplies bf16
tiles wrongly in tl.dot, rounds some values to e4m3 wrongly at binade edges, and cannot take a
runtime loop bound (the scripts apply triton_cpu.INTERPRETER_FIX first), so the GEMMs run here in
fp16/fp32 with pre-quantized fp8 operands; the GPU tests (test_ch14_gpu.py) check the bf16 and fp8
paths themselves. The TMA grouped GEMM is also compiled for sm_90 here, one autotune config at a
time, and its PTX, SASS and resources read."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from ci_triton_scripts import assert_ran, run_scripts
from triton_cpu import INTERPRETER_FIX, assert_tma_and_wgmma, compile_sm90, fits_sm90, ptxas_advisories

from aisp.harness.loader import import_module_at

pytest.importorskip("triton")
REPO = Path(__file__).resolve().parents[1]


ADD_NORM_GELU = """
        import torch.nn.functional as F
        from optimized_triton_fused_layernorm import add_norm_gelu
        x, r = torch.randn(7, 300).bfloat16(), torch.randn(7, 300).bfloat16()
        w, b = torch.randn(300).bfloat16(), torch.randn(300).bfloat16()
        ref = F.gelu(F.layer_norm(x + r, (300,), w, b, 1e-5), approximate="tanh").float()
        out = add_norm_gelu(x, r, w, b, 1e-5).float()
        assert (out - ref).abs().max() <= 2 ** -5 * ref.abs().max(), (out - ref).abs().max()
        assert (out - ref).norm() / ref.norm() < 1.5e-2  # the interpreter truncates to bf16 (GPU: rounds)
    """


def test_fused_add_norm_gelu_matches_eager_on_ragged_rows(interpreted: dict) -> None:
    assert_ran(interpreted, "add_norm_gelu")


GROUPED_GEMM = """
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
    """


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_gemm_matches_a_loop_with_uneven_and_empty_groups(dtype: str, interpreted: dict) -> None:
    assert_ran(interpreted, f"grouped_gemm[{dtype}]")


GROUPED_TMA = """
        from optimized_triton_grouped_gemm import Tiling, block_table
        from ch14_grouped_tma import grouped_mm_tma
        rows, dt = [5, 40, 17, 0, 33, 16, 7], torch.{dtype}
        a, b = torch.randn(sum(rows), 64).to(dt), torch.randn(len(rows), 64, 64).to(dt)
        starts = [sum(rows[:g]) for g in range(len(rows))]
        ref = torch.cat([a[s:s + n].double() @ b[g].double() for g, (s, n) in enumerate(zip(starts, rows))])
        for programs, tiling in ((3, Tiling(bm=16, bn=16, bk=16)), (100, Tiling(bm=16, bn=32, bk=32))):
            out = torch.full((sum(rows), 64), float("nan")).to(dt)
            grouped_mm_tma(a, b, block_table(rows, 16, a.device), out, programs, tiling)
            err = (out.double() - ref).abs().max().item()
            assert err < (1e-5 if dt == torch.float32 else 2e-3) * ref.abs().max().item(), (programs, err)
    """


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_gemm_tma_matches_fp64_with_uneven_and_empty_groups(dtype: str, interpreted: dict) -> None:
    """Bands not multiples of the block (a block's box reads the next band's rows, which the store
    must drop), an empty band, a last band whose box runs past the end of ``a`` (TMA's zero fill),
    fewer programs than tiles and more; every row written exactly once."""
    assert_ran(interpreted, f"grouped_tma[{dtype}]")


GROUPED_TMA_SPLIT = """
        from optimized_triton_grouped_gemm import Tiling
        from ch14_grouped_tma_split import grouped_mm_tma_split, split_block_table
        dt = torch.{dtype}
        def check(rows, bm, tilings):
            a, b = torch.randn(sum(rows), 64).to(dt), torch.randn(len(rows), 64, 64).to(dt)
            starts = [sum(rows[:g]) for g in range(len(rows))]
            ref = torch.cat([a[s:s + n].double() @ b[g].double() for g, (s, n) in enumerate(zip(starts, rows))])
            table = split_block_table(rows, bm, a.device)
            assert set(table[3].tolist()) == {{bm, bm // 2}}, table[3]
            for programs, tiling in tilings:
                out = torch.full((sum(rows), 64), float("nan")).to(dt)
                grouped_mm_tma_split(a, b, table, out, programs, tiling)
                err = (out.double() - ref).abs().max().item()
                assert err < (1e-5 if dt == torch.float32 else 2e-3) * ref.abs().max().item(), (bm, programs, err)
            return a, b, table
        check([128, 0, 129, 64, 65, 320, 1, 193, 0, 37], 128,
              ((5, Tiling(bm=128, bn=32, bk=32)), (100, Tiling(bm=128, bn=64, bk=64))))
        check([5, 40, 17, 0, 33, 16, 8, 9, 7], 16, ((3, Tiling(bm=16, bn=16, bk=16)),))
        a, b, table = check([100, 30], 128, ((4, Tiling(bm=128, bn=32, bk=32)),))
        lying = table[:3] + (torch.tensor([64, 64], dtype=torch.int32),)
        out = torch.full((130, 64), float("nan")).to(dt)
        grouped_mm_tma_split(a, b, lying, out, 4, Tiling(bm=128, bn=32, bk=32))
        assert not out[:64].isnan().any() and out[64:100].isnan().all() and not out[100:].isnan().any()
    """


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_gemm_tma_split_matches_fp64_on_band_tails_of_0_1_64_and_65_rows(dtype: str, interpreted: dict) -> None:
    """The two-height kernel at the GPU's 128-row blocks: bands whose last block holds 128 (a
    remainder of 0), 1, 64 and 65 rows, empty bands, a last band whose box runs past the end of
    ``a``; fewer programs than tiles and more; then 16-row blocks (8-row tails). Then a table that
    says 64 rows for a block holding 100: only the 64 are written, so the kernel does take the
    short path where its table says so (a kernel that ignored the height would pass the rest)."""
    assert_ran(interpreted, f"grouped_tma_split[{dtype}]")


def test_grouped_gemm_tma_refuses_what_tma_cannot_address() -> None:
    mod = import_module_at(REPO / "ch14" / "ch14_grouped_tma.py")
    table = import_module_at(REPO / "ch14" / "optimized_triton_grouped_gemm.py").block_table([3, 5], 16, "cpu")
    tiling = mod.Tiling(bm=16, bn=16, bk=16)
    a, b, out = torch.zeros(8, 64), torch.zeros(2, 64, 32), torch.zeros(8, 32)
    cases = {"N=24": (a, b[:, :, :24].contiguous(), out[:, :24].contiguous()),
             "b transposed": (a, b.transpose(1, 2).contiguous().transpose(1, 2), out),
             "a's base off 16 bytes": (torch.zeros(8 * 64 + 1)[1:].view(8, 64), b, out)}
    for name, (a_, b_, out_) in cases.items():
        with pytest.raises(ValueError, match="grouped_mm_tma"):
            mod.grouped_mm_tma(a_, b_, table, out_, 3, tiling)
            pytest.fail(f"accepted {name}")


PAIR_SCRIPT = """
import dataclasses, types
from pathlib import Path
from refill_check import check_pair
from aisp.harness.loader import import_module_at
from baseline_triton_grouped_gemm import grouped_workload
# bands of 40, 336 and 176 rows: less than a tile, ragged tails under and over half a tile (both of the split
# kernel's heights), 12 tiles of 128 x 128 on 5 programs (a short last round), the last box past a's end
SMALL = grouped_workload(groups=3, k=64, n=256)
torch.cuda.get_device_properties = lambda device: types.SimpleNamespace(multi_processor_count=5)

def build(module, seed):
    \"\"\"The pair's file at a small size; its bf16 operands made fp16 after setup (the interpreter's
    bf16 tl.dot is wrong, see the module docstring).\"\"\"
    bench = import_module_at(Path("ch14") / f"{module}.py").get_benchmark()
    bench.device, bench.seed, bench.workload = torch.device("cpu"), seed, SMALL
    setup = bench.setup
    def fp16_setup():
        setup()
        bench.a, bench.b, bench.out = bench.a.half(), bench.b.half(), bench.out.half()
    bench.setup = fp16_setup
    return bench

for base, opt in PAIRS:
    check_pair(build, base, opt)
    print("verified", opt)
"""


def grouped_pairs() -> list[tuple[str, str]]:
    from conftest import variant_modules
    return [(b, o) for b, o in variant_modules(REPO / "ch14") if b == "baseline_triton_grouped_gemm"]


def test_grouped_gemm_variants_verify_against_the_loop_under_the_interpreter(interpreted: dict) -> None:
    """Each optimized variant of the pair (pointer, TMA and split TMA kernels, default tiles) against the
    torch.mm loop as the harness checks it: two seeds, another seed's answer rejected, refilled inputs."""
    assert len(grouped_pairs()) == 3
    assert_ran(interpreted, "pairs")


FP8_GEMM = """
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
    """


def test_fp8_quantization_scales_and_scaled_gemm(interpreted: dict) -> None:
    assert_ran(interpreted, "fp8_gemm")


RELU_SQUARED = """
        from baseline_custom_op_graph_break import launch_relu_squared
        x = torch.randn(5000).bfloat16()
        ref = torch.relu(x.float()) ** 2
        assert ((launch_relu_squared(x).float() - ref).abs() <= 2 ** -7 * ref).all()  # one bf16 rounding
    """


def test_relu_squared_kernel(interpreted: dict) -> None:
    assert_ran(interpreted, "relu_squared")


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


GROUPED_TMA_SIG = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "blk_group": "*i32", "blk_start": "*i32",
                   "blk_end": "*i32", "blocks": "i32", "programs": "i32", "rows": "i32", "experts": "i32", "N": "i32",
                   "K": "i32"}
GROUPED_SPLIT_SIG = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "blk_group": "*i32", "blk_start": "*i32",
                     "blk_end": "*i32", "blk_height": "*i32", "blocks": "i32", "programs": "i32", "rows": "i32",
                     "experts": "i32", "N": "i32", "K": "i32"}
GROUPED_KERNELS = {"tma": ("ch14/ch14_grouped_tma:_grouped_gemm_tma", GROUPED_TMA_SIG),
                   "tma_split": ("ch14/ch14_grouped_tma_split:_grouped_gemm_tma_split", GROUPED_SPLIT_SIG)}
"""The grouped TMA kernels and their runtime signatures (the split kernel's table has a fourth column)."""


def grouped_tma_configs() -> list:
    return import_module_at(REPO / "ch14" / "ch14_grouped_tma.py").CONFIGS


@pytest.mark.parametrize("kernel", sorted(GROUPED_KERNELS))
@pytest.mark.parametrize("config", grouped_tma_configs(), ids=str)
def test_sm90_grouped_tma_config_compiles_to_wgmma_and_tma_without_spills(kernel: str, config) -> None:
    """Each autotune candidate as the pair launches it: A and B by TMA (cp.async.bulk.tensor, no
    per-thread cp.async), products by wgmma (HGMMA), no local memory or stack (spills), and the
    shared memory a block may take (a candidate over either fails at launch or crawls)."""
    consts = {"BM": import_module_at(REPO / "ch14" / "ch14_grouped_tma.py").BM} | config.kwargs
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    compiled = compile_sm90(*GROUPED_KERNELS[kernel], consts, options)
    assert_tma_and_wgmma(compiled, "A/B")
    fits_sm90(compiled)


def tile_loops(ptx: str) -> list[tuple[int, int]]:
    """(TMA copies, wgmma) in the body of each PTX loop whose body holds both a wgmma and a global
    store: a tile loop (K steps, then the epilogue's stores of C)."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M)}
    loops = []
    for edge in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        start = labels.get(edge.group(1))
        body = ptx[start:edge.start()] if start is not None and start < edge.start() else ""
        if "wgmma.mma_async" in body and "st.global" in body:
            loops.append((body.count("cp.async.bulk.tensor"), body.count("wgmma.mma_async")))
    return loops


@pytest.mark.parametrize("stages", [3, 4])
def test_sm90_tma_flattens_its_tile_loop_and_split_does_not(stages: int) -> None:
    """A tile loop flattened into its K loop (``flatten=True``) issues one K step's two TMA copies
    (A and B) a trip, the next tile's among them; one that is not holds the K loop's prologue too
    (2 x stages copies: it drains and refills its pipeline at every tile). ``_tma`` has one
    flattened tile loop; ``_tma_split``'s branch per tile leaves its loop unflattened (why it
    measured no faster than ``_tma``)."""
    consts, options = {"BM": 128, "BN": 256, "BK": 64}, {"num_warps": 8, "num_stages": stages}
    compiled = {k: compile_sm90(*GROUPED_KERNELS[k], consts, options) for k in ("tma", "tma_split")}
    assert tile_loops(compiled["tma"].asm["ptx"]) == [(2, 4)]
    assert tile_loops(compiled["tma_split"].asm["ptx"])[0][0] == 2 * stages


ALIBI = """
        import triton
        from baseline_flex_score_mod import alibi_causal_bias, alibi_slopes
        from ch14_alibi_flash import alibi_flash_attention
        for (b, h, s, d), (bm, bn), dt in [((1, 3, 64, 32), (32, 16), torch.float32),
                                           ((2, 2, 128, 16), (64, 32), torch.float32),
                                           ((1, 2, 64, 32), (32, 32), torch.float16)]:
            q, k, v = (torch.randn(b, h, s, d).to(dt) for _ in range(3))
            slopes = alibi_slopes(h, torch.device("cpu")) * 4  # steeper than the pair's: the bias matters
            bias = alibi_causal_bias(h, s, "cpu").double() * 4
            ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) / d ** 0.5 + bias, -1) @ v.double()
            config = triton.Config({{"BLOCK_M": bm, "BLOCK_N": bn, "MMA_BIAS": {mma_bias}}})
            err = (alibi_flash_attention(q, k, v, slopes, config=config).double() - ref).abs().max().item()
            assert err < (2e-5 if dt == torch.float32 else 3e-3), (dt, bm, bn, err)
            flat = alibi_flash_attention(q, k, v, slopes * 0, config=config).double()
            assert (flat - ref).abs().max().item() > 0.05
    """


@pytest.mark.parametrize("mma_bias", [False, True])
def test_alibi_flash_matches_fp64_alibi_attention(mma_bias: bool, interpreted: dict) -> None:
    """``ch14_alibi_flash`` (flex_score_mod's ``_triton``) under the interpreter, each route of the bias,
    against softmax(q k^T / sqrt(d) + the baseline's causal ALiBi bias) v in fp64: several query
    blocks, one tile a block (BLOCK_M = BLOCK_N) and two, batch > 1 (heads share the slopes by head
    index), fp32 and fp16; the kernel without its bias (slopes 0) rejected."""
    assert_ran(interpreted, f"alibi[{mma_bias}]")


def test_alibi_bias_table_parts_sum_to_the_bias_and_bad_inputs_are_refused() -> None:
    """The table's three parts add up to m_h sqrt(d) j within fp32's precision in bf16 (one part alone
    would be off by up to ~45 at the pair's shape), the columns after them are 0; shapes the kernel
    cannot take raise ValueError before any launch."""
    flash = import_module_at(REPO / "ch14" / "ch14_alibi_flash.py")
    base = import_module_at(REPO / "ch14" / "baseline_flex_score_mod.py")
    slopes = base.alibi_slopes(16, torch.device("cpu"))
    table = flash.bias_table(slopes, 4096, 64, torch.bfloat16).view(16, 4096, -1)
    exact = slopes.double()[:, None] * 8 * torch.arange(4096, dtype=torch.float64)
    assert (table[..., :3].double().sum(-1) - exact).abs().max() <= exact.abs().max() * 2 ** -22
    assert (table[..., 0].double() - exact).abs().max() > 10
    assert not table[..., 3:].any()
    q = torch.randn(1, 2, 96, 64)
    with pytest.raises(ValueError, match="tiles dividing seq"):
        flash.alibi_flash_attention(q, q, q, slopes[:2], config=flash.CONFIGS[0])
    with pytest.raises(ValueError, match="slopes"):
        flash.alibi_flash_attention(q, q, q, slopes)


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """The scripts above, each after INTERPRETER_FIX with ch14 and tests on its path and torch seeded, in
    forks of one process that imported torch and triton once for all twelve (tests/ci_triton_scripts.py)."""
    scripts = {"add_norm_gelu": ADD_NORM_GELU, "pairs": f"PAIRS = {grouped_pairs()!r}\n" + PAIR_SCRIPT,
               "fp8_gemm": FP8_GEMM, "relu_squared": RELU_SQUARED}
    for dtype in ("float16", "float32"):
        scripts |= {f"{name}[{dtype}]": code.format(dtype=dtype) for name, code in (
            ("grouped_gemm", GROUPED_GEMM), ("grouped_tma", GROUPED_TMA), ("grouped_tma_split", GROUPED_TMA_SPLIT))}
    for mma_bias in (False, True):
        scripts[f"alibi[{mma_bias}]"] = ALIBI.format(mma_bias=mma_bias)
    prelude = INTERPRETER_FIX + "import sys, torch\nsys.path[:0] = ['ch14', 'tests']\ntorch.manual_seed(0)\n"
    return run_scripts({name: prelude + textwrap.dedent(code) for name, code in scripts.items()}, timeout=600)


ALIBI_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "slopes_ptr": "*fp32",
             "bias_ptr": "*bf16", "n_heads": "i32", "heads": "i32", "seq": "i32", "qk_scale": "fp32"}


def alibi_configs() -> list:
    return import_module_at(REPO / "ch14" / "ch14_alibi_flash.py").CONFIGS


@pytest.mark.parametrize("config", alibi_configs(), ids=str)
def test_sm90_alibi_flash_config_compiles_to_wgmma_and_tma_without_spills(config) -> None:
    """Each autotune candidate of the ALiBi kernel at the pair's shape (head dim 64, 32 heads to a
    group): K/V by TMA, wgmma, no spills, within its register cap and the shared memory of a block,
    no ptxas advisory (no wgmma serialized); with the bias by wgmma, one more 16-wide HGMMA per Q K^T."""
    consts = {"D": 64, "HEAD_GROUP": 16} | config.kwargs
    options = {k: v for k, v in config.all_kwargs().items() if k in ("num_warps", "num_stages", "maxnreg") and v}
    compiled = compile_sm90("ch14/ch14_alibi_flash:_alibi_flash_fwd", ALIBI_SIG, consts, options, divisible=("seq",))
    assert_tma_and_wgmma(compiled, "K/V")
    assert fits_sm90(compiled)["REG"] <= (config.maxnreg or 255)
    assert ptxas_advisories(compiled) == []
    if config.kwargs["MMA_BIAS"]:  # the same config with the bias in the softmax: one wgmma fewer a Q K^T
        plain = compile_sm90("ch14/ch14_alibi_flash:_alibi_flash_fwd", ALIBI_SIG, consts | {"MMA_BIAS": False},
                             options, divisible=("seq",))
        count = [c.asm["ptx"].count("wgmma.mma_async") for c in (compiled, plain)]
        loops = 2 if config.kwargs["BLOCK_M"] > config.kwargs["BLOCK_N"] else 1  # one diagonal tile: no masked loop
        assert count[0] - count[1] == 1 + loops, count  # the first Q K^T and each key loop's
