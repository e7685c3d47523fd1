"""Chapter 6 on a GPU: every pair's variants agree (ilp_accumulators also on refilled inputs), the
native kernels of the variants (affine_rows, dequantize4) match PyTorch on odd shapes and refuse
what they cannot take, the occupancy model matches the runtime's answers for every kernel, the
occupancy facts the pair headers state hold on this GPU, and the first-kernel tool runs. (Timings
come from ``aisp bench run -t ch06``.)"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair

from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare
from aisp.kits import native

pytestmark = pytest.mark.gpu
CH06 = Path(__file__).resolve().parents[1] / "ch06"
PAIRS = ("vectorized_ops", "vector_add", "block_size", "occupancy_api", "launch_bounds", "ilp_accumulators",
         "bank_conflicts", "unified_memory_prefetch")
VARIANTS = (("vectorized_ops", "optimized_vectorized_ops_native"), ("vectorized_ops", "optimized_vectorized_ops_wave"),
            ("occupancy_api", "optimized_occupancy_api_ilp"),
            ("launch_bounds", "optimized_launch_bounds_fitted"), ("launch_bounds", "optimized_launch_bounds_pipelined"),
            ("launch_bounds", "optimized_launch_bounds_async"),
            ("bank_conflicts", "optimized_bank_conflicts_swizzled"), ("block_size", "optimized_block_size_float4"))
"""(pair, further optimized file) of every variant beside the pair's optimized file."""


def load(module: str) -> ModuleType:
    return import_module_at(CH06 / f"{module}.py")


def sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def skip_without_page_faulting() -> None:
    lib = load("baseline_unified_memory_prefetch").LIBRARY.load()
    if not lib.um_supported():
        pytest.skip("no GPU page faulting here (cudaDevAttrConcurrentManagedAccess = 0)")


@pytest.mark.parametrize("name", PAIRS)
def test_pair_matches_on_gpu(name: str) -> None:
    if name == "unified_memory_prefetch":
        skip_without_page_faulting()
    outs = []
    for side in ("baseline", "optimized"):
        bench = load(f"{side}_{name}").get_benchmark()
        bench.device, bench.seed = torch.device("cuda"), 3
        bench.setup()
        outs.append(bench.run().detach().clone())
        bench.teardown()
    w = bench.workload
    compare([("output", outs[0])], [("output", outs[1])], w)


@pytest.mark.parametrize(("name", "variant"), VARIANTS)
def test_variant_matches_baseline_also_on_refilled_inputs(name: str, variant: str) -> None:
    base, opt = load(f"baseline_{name}").get_benchmark(), load(variant).get_benchmark()
    for bench in (base, opt):
        bench.device, bench.seed = torch.device("cuda"), 3
    check_refilled_pair(base, opt, base.workload)


@pytest.mark.parametrize(("name", "variant"), [v for v in VARIANTS if v[0] in ("launch_bounds", "bank_conflicts",
                                                                          "block_size")])
def test_fitted_pipelined_and_swizzled_variants_are_bitwise_the_baseline(name: str, variant: str) -> None:
    """Same FMAs (FADDs for block_size) in the same order per element as the baseline kernel: the same bits."""
    outs = []
    for module in (f"baseline_{name}", variant):
        bench = load(module).get_benchmark()
        bench.device, bench.seed = torch.device("cuda"), 4
        bench.setup()
        outs.append(bench.run().detach().clone())
        bench.teardown()
    assert torch.equal(outs[0], outs[1]), f"{int((outs[0] != outs[1]).sum())} of {outs[0].numel()} differ"


def horner(kernel: int, x: torch.Tensor, coef: torch.Tensor, out: torch.Tensor) -> int:
    lib = load("baseline_launch_bounds").LIBRARY.load()
    lib.horner_run.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_void_p]
    status = lib.horner_run(kernel, lib.horner_grid(kernel), x.data_ptr(), coef.data_ptr(), out.data_ptr(),
                            out.numel(), native.stream())
    torch.cuda.synchronize()
    return status


@pytest.mark.parametrize("kernel", [2, 3, 4])
@pytest.mark.parametrize("n", [1, 3, 4, 1027, 4 * 512 * 1500 + 4 * 300 + 3, (1 << 22) + 3, (1 << 24) + 5])
def test_horner_fitted_pipelined_and_async_match_horner_free_on_odd_sizes(n: int, kernel: int) -> None:
    """The float4 loop (horner_pipelined's: threads with an odd and an even count of groups, and
    none; horner_async's: blocks with 0, 1, 2 and 7-8 full tiles of 512 float4, the copies ahead cut at
    the last, then a partial tile) and the n % 4 tail; fewer elements than threads. kernel 2:
    horner_fitted, 3: horner_pipelined, 4: horner_async."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    coef = torch.randn(48, device="cuda", generator=gen) / torch.arange(1, 49, device="cuda")
    ref, out = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    assert horner(0, x, coef, ref) == 0 and horner(kernel, x, coef, out) == 0
    assert torch.equal(out, ref)


@pytest.mark.parametrize("kernel", [2, 3, 4])
def test_horner_fitted_and_pipelined_refuse_unaligned_vectors(kernel: int) -> None:
    x = torch.zeros(9, device="cuda")
    assert horner(kernel, x[1:], torch.zeros(48, device="cuda"), torch.empty(8, device="cuda")) == -1


def scores(layout: int, q: torch.Tensor, k: torch.Tensor, s: torch.Tensor) -> int:
    lib = load("baseline_bank_conflicts").LIBRARY.load()
    lib.scores_run.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]
    status = lib.scores_run(layout, q.data_ptr(), k.data_ptr(), s.data_ptr(), s.shape[0], native.stream())
    torch.cuda.synchronize()
    return status


@pytest.mark.parametrize("tiles", [1, 3, 1001])
def test_scores_swizzled_matches_padded_on_odd_tile_counts(tiles: int) -> None:
    """An odd count leaves the last block's second tile empty; the tile past the end stays untouched."""
    gen = torch.Generator(device="cuda").manual_seed(tiles)
    q, k = (torch.randn(tiles, 32, 32, device="cuda", generator=gen) for _ in range(2))
    ref, out = torch.full_like(q, float("nan")), torch.full((tiles + 1, 32, 32), float("nan"), device="cuda")
    assert scores(1, q, k, ref) == 0 and scores(2, q, k, out[:tiles]) == 0
    assert torch.equal(out[:tiles], ref) and bool(out[tiles].isnan().all())
    assert scores(2, q, k, torch.empty(tiles * 1024 + 1, device="cuda")[1:].view(tiles, 32, 32)) == -1


def blocked4(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> int:
    lib = load("ch06_common").VECTOR_LIBRARY.load()
    lib.add_blocked4_run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_void_p]
    status = lib.add_blocked4_run(a.data_ptr(), b.data_ptr(), c.data_ptr(), c.numel(), native.stream())
    torch.cuda.synchronize()
    return status


@pytest.mark.parametrize("n", [4, 1020, 2044, 2048, 2052, 4 * (512 * 3 + 257), 4 * (512 * 1056 + 3), 1 << 25])
def test_add_blocked4_matches_on_partial_blocks_and_writes_nothing_past_n(n: int) -> None:
    """optimized_block_size_float4's kernel: one float4 (n = 4), a partial first block, whole blocks,
    a last block whose threads have 1, 2 or no float4s, the pair's 32M; the float past n stays NaN."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    a, b = (torch.randn(n, device="cuda", generator=gen) for _ in range(2))
    out = torch.full((n + 4,), float("nan"), device="cuda")
    assert blocked4(a, b, out[:n]) == 0
    assert torch.equal(out[:n], a + b) and bool(out[n:].isnan().all())


def test_add_blocked4_refuses_what_float4_cannot_read() -> None:
    x = torch.zeros(12, device="cuda")
    assert blocked4(x[:6], x[:6], torch.empty(6, device="cuda")) == -1  # n % 4
    assert blocked4(x[1:9], x[:8], torch.empty(8, device="cuda")) == -1  # a misaligned
    assert blocked4(x[:0], x[:0], torch.empty(0, device="cuda")) == -1  # nothing to add


@pytest.mark.parametrize("module", ["optimized_vectorized_ops_native", "optimized_vectorized_ops_wave"])
def test_affine_rows_is_torch_addcmul_bitwise(module: str) -> None:
    """PyTorch's CUDA addcmul with value = 1 rounds once (std::fma), as affine_rows' fmaf does. If
    this fails on another PyTorch, the pair still verifies (fp32 tolerance); the header's
    "bitwise" claim is what changes."""
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), 5
    bench.setup()
    out = bench.run().clone()
    ref = torch.addcmul(bench.bias, bench.x, bench.scale)
    assert torch.equal(out, ref), f"{int((out != ref).sum())} of {ref.numel()} differ"
    bench.teardown()


def affine(rows: int, cols: int, groups: int | None = None) -> tuple[int, torch.Tensor, torch.Tensor]:
    """affine_rows over a rows x cols matrix: (status, out, torch.addcmul's answer)."""
    mod = load("optimized_vectorized_ops_native")
    lib = mod.LIBRARY.load(None, {"affine_rows_run": [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p],
                                  "affine_rows_groups": [ctypes.c_int, ctypes.c_int]})
    gen = torch.Generator(device="cuda").manual_seed(rows * 7 + cols)
    x = torch.randn(rows, cols, device="cuda", generator=gen)
    scale, bias = torch.randn(cols, device="cuda", generator=gen), torch.randn(cols, device="cuda", generator=gen)
    out = torch.full_like(x, float("nan"))
    groups = lib.affine_rows_groups(rows, cols) if groups is None else groups
    status = lib.affine_rows_run(x.data_ptr(), scale.data_ptr(), bias.data_ptr(), out.data_ptr(), rows, cols, groups,
                                 native.stream())
    torch.cuda.synchronize()
    return status, out, torch.addcmul(bias, x, scale)


@pytest.mark.parametrize(("rows", "cols", "groups"), [(1, 4, None), (5, 36, None), (1000, 4100, None),
                                                      (2048, 32768, None), (7, 1028, 3), (9, 8, 1)])
def test_affine_rows_matches_addcmul_on_odd_shapes(rows: int, cols: int, groups: int | None) -> None:
    """Column slices with idle threads (cols / 4 not a multiple of 256), rows left over after the
    2-row steps, one row group, more groups than SMs need."""
    status, out, ref = affine(rows, cols, groups)
    assert status == 0
    torch.testing.assert_close(out, ref, rtol=1.2e-7, atol=1e-6)


def test_affine_rows_refuses_what_float4_cannot_read() -> None:
    assert affine(3, 6, 1)[0] == -1  # cols % 4
    assert affine(3, 8, 0)[0] == -1  # no row group
    lib = load("optimized_vectorized_ops_native").LIBRARY.load()
    assert lib.affine_rows_groups(2048, 6) == -1
    assert lib.affine_rows_groups(2048, 32768) == -(-8 * sms() // 32)  # 8 blocks/SM x SMs over 32 slices


def test_wave_variant_grid_is_one_wave_of_the_native_kernel() -> None:
    """The one-wave variant's blocks all fit at once (8 of 256 a SM), where the native variant's
    rounded-up grid leaves some for a second wave at the H200 size."""
    bench = load("optimized_vectorized_ops_wave").get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), 5
    bench.setup()
    resident, w = bench.lib.affine_rows_resident(), bench.workload
    assert resident == 8 * sms()
    slices = w.cols // 4 // 256
    assert slices * bench.groups <= resident < slices * (bench.groups + 1)
    assert bench.lib.affine_rows_groups(w.rows, w.cols) == bench.groups + (resident % slices > 0)
    bench.teardown()


def dequantize4(n: int, offset: int = 0) -> tuple[int, torch.Tensor, torch.Tensor]:
    """dequantize4 over n codes (some negative) at the API's launch: (status, out, reference)."""
    lib = load("baseline_occupancy_api").LIBRARY.load()
    grid, block = ctypes.c_int(), ctypes.c_int()
    assert lib.dequantize4_api_config(ctypes.byref(grid), ctypes.byref(block)) == 0
    fn = lib.dequantize4_launch
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_void_p], ctypes.c_int
    gen = torch.Generator(device="cuda").manual_seed(n)
    codes = torch.randint(-8192, 8192, (n + offset,), dtype=torch.int16, device="cuda", generator=gen)[offset:]
    table = torch.randn(8192, device="cuda", generator=gen)
    out = torch.full((n,), float("nan"), device="cuda")
    status = fn(codes.data_ptr(), table.data_ptr(), out.data_ptr(), n, grid.value, block.value, native.stream())
    torch.cuda.synchronize()
    return status, out, table[codes.long() & 8191]


@pytest.mark.parametrize("n", [4, 1 << 12, 4 * 4 * 1024 * 264 + 12, 1 << 26])
def test_dequantize4_matches_the_lookup(n: int) -> None:
    """Sizes below one grid, past whole 4-group steps (the remainder loop), and the pair's."""
    status, out, ref = dequantize4(n)
    assert status == 0 and torch.equal(out, ref)


def test_dequantize4_refuses_what_it_cannot_read_and_gets_the_full_launch() -> None:
    assert dequantize4(6)[0] == -1  # n % 4
    assert dequantize4(8, offset=1)[0] == -1  # codes 2 bytes past 8-byte alignment
    occupancy = load("occupancy")
    _, _, api, advice = occupancy.query(occupancy.LIBRARY.load(), [1024])
    assert api[("dequantize4", 1024)] == 2
    assert any(a.split()[:4] == ["dequantize4", "block", "1024,", "grid"] and a.split()[4] == str(2 * sms())
               for a in advice), advice


def test_ilp_accumulators_match_on_refilled_inputs() -> None:
    """The harness's checked call: x refilled with normal values of its mean and std (some |x| > 1,
    which overflowed fp32 before the kernels clamped x) before both variants run again."""
    base, opt = (load(f"{side}_ilp_accumulators").get_benchmark() for side in ("baseline", "optimized"))
    for bench in (base, opt):
        bench.device, bench.seed = torch.device("cuda"), 3
    check_refilled_pair(base, opt, base.workload)
    assert float(base.x.abs().max()) > 1 and bool(torch.isfinite(opt.out).all())


def test_occupancy_model_matches_the_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("occupancy").main(["--blocks", "32", "64", "128", "256", "512", "1024"]) == 0, capsys.readouterr().out


def test_occupancy_api_picks_full_occupancy_for_dequantize() -> None:
    occupancy = load("occupancy")
    sm, kernels, api, advice = occupancy.query(occupancy.LIBRARY.load(), [128, 1024])
    assert api[("dequantize", 128)] == 6 and api[("dequantize", 1024)] == 2
    line = next(a for a in advice if "dequantize" in a)
    assert "block 1024" in line and f"grid {2 * sm.sms:>5}" in line


def test_grids_fill_every_sm_as_the_headers_say() -> None:
    lb = load("baseline_launch_bounds").LIBRARY.load()
    assert [lb.horner_grid(k) for k in range(5)] == [4 * sms(), 8 * sms(), 8 * sms(), 8 * sms(), 8 * sms()]
    assert lb.horner_grid(5) == -1
    assert load("baseline_bank_conflicts").LIBRARY.load().scores_swizzled_blocks_per_sm() == 10
    assert load("ch06_common").VECTOR_LIBRARY.load().grid_stride_blocks() == 8 * sms()


def test_first_kernels_tool(capfd: pytest.CaptureFixture[str]) -> None:
    assert load("first_kernels").main(["--rows", "100", "--cols", "37"]) == 0
    out = capfd.readouterr().out
    assert "Hello from block 1, thread 3" in out and "All results match PyTorch." in out


def test_managed_memory_support_is_reported() -> None:
    lib = load("baseline_unified_memory_prefetch").LIBRARY.load()
    assert lib.um_supported() in (0, 1)
    lib.um_alloc.restype, lib.um_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    ptr = lib.um_alloc(1 << 20)
    assert ptr and native.check(lib.um_free(ctypes.c_void_p(ptr)), "cudaFree") is None
