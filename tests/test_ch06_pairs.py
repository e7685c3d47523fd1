"""Chapter 6 on the CPU: the harness finds every pair; vectorized_ops matches on the CPU (two
seeds, refilled inputs); CUDA pairs skip with the reason; every pair file documents itself; every
.cu builds through aisp.kits.native for sm_90 and exports what Python calls; the math the CUDA
kernels rely on (the ILP split, the Horner reference) holds in float64."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare, refill
from aisp.kits import native

CH06 = Path(__file__).resolve().parents[1] / "ch06"
PAIRS = ("vectorized_ops", "vector_add", "block_size", "occupancy_api", "launch_bounds", "ilp_accumulators",
         "bank_conflicts", "unified_memory_prefetch")
CUDA_PAIRS = PAIRS[1:]
VARIANTS = ("optimized_vectorized_ops_native", "optimized_vectorized_ops_wave", "optimized_occupancy_api_ilp", "optimized_launch_bounds_fitted",
            "optimized_launch_bounds_pipelined", "optimized_launch_bounds_async", "optimized_bank_conflicts_swizzled",
            "optimized_block_size_float4")
"""Further optimized files of a pair (CUDA C++), measured beside the pair's optimized file."""
LIBRARIES = {"baseline_occupancy_api": "dequantize4_launch", "optimized_vectorized_ops_native": "affine_rows_run", "baseline_launch_bounds": "horner_grid",
             "baseline_ilp_accumulators": "ilp_run", "baseline_bank_conflicts": "scores_run",
             "baseline_unified_memory_prefetch": "um_supported", "ch06_common": "grid_stride_blocks",
             "first_kernels": "index_2d_run", "occupancy": "occ_suggest"}
"""Each module that declares a native.Library, and one C entry point of it."""
LIBRARY_ATTR = {"ch06_common": "VECTOR_LIBRARY"}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def load(module: str) -> ModuleType:
    return import_module_at(CH06 / f"{module}.py")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    return bench


def small_rows(module: str, seed: int) -> aisp.Benchmark:
    """A vectorized_ops side at 64 x 1,024: the H200 size (2,048 x 131,072, 1 GiB a tensor) took
    minutes on a CPU; the logic is the same at any size."""
    bench = build(module, seed)
    bench.workload = replace(bench.workload, rows=64, cols=1024)
    return bench


def library(module: str) -> native.Library:
    return getattr(load(module), LIBRARY_ATTR.get(module, "LIBRARY"))


def test_harness_discovers_every_pair() -> None:
    assert sorted(p.name for p in pairs_in(CH06)) == sorted(PAIRS)


@pytest.mark.parametrize("seed", [0, 1])
def test_vectorized_ops_matches_on_cpu_and_keeps_inputs(seed: int) -> None:
    outs = []
    for module in ("baseline_vectorized_ops", "optimized_vectorized_ops"):
        bench = small_rows(module, seed)
        bench.setup()
        before = bench.x.clone()
        outs.append(bench.run().clone())
        assert torch.equal(bench.x, before)
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    assert torch.equal(outs[0], torch.addcmul(bench.bias, bench.x, bench.scale))


def test_vectorized_ops_matches_on_refilled_inputs() -> None:
    base, opt = small_rows("baseline_vectorized_ops", 0), small_rows("optimized_vectorized_ops", 0)
    check_refilled_pair(base, opt, base.workload)


@pytest.mark.parametrize("name", CUDA_PAIRS)
@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_cuda_pair_skips_with_reason_on_cpu(name: str, side: str) -> None:
    reason = unmet_requirements(build(f"{side}_{name}", 0).workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("module", [f"{side}_{name}" for name in PAIRS for side in ("baseline", "optimized")])
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"
    expect = doc[doc.index("Expect"):doc.index("Run:")]
    assert any(s in expect for s in ("measured on an H200", "measured, H200", "re-run pending on an H200")), expect


def test_variants_belong_to_their_pairs() -> None:
    found = {p.name: {o.stem for o in p.optimized} for p in pairs_in(CH06)}
    assert found["vectorized_ops"] == {"optimized_vectorized_ops", "optimized_vectorized_ops_native",
                                       "optimized_vectorized_ops_wave"}
    assert found["occupancy_api"] == {"optimized_occupancy_api", "optimized_occupancy_api_ilp"}
    assert found["launch_bounds"] == {"optimized_launch_bounds", "optimized_launch_bounds_fitted",
                                      "optimized_launch_bounds_pipelined", "optimized_launch_bounds_async"}
    assert found["bank_conflicts"] == {"optimized_bank_conflicts", "optimized_bank_conflicts_swizzled"}
    assert found["block_size"] == {"optimized_block_size", "optimized_block_size_float4"}


@pytest.mark.parametrize("module", VARIANTS)
def test_variant_documents_itself_and_skips_without_cuda(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"
    expect = doc[doc.index("Expect"):doc.index("Run:")]
    assert any(s in expect for s in ("measured, H200", "estimated, not yet measured", "not yet measured. Estimate")), expect
    reason = unmet_requirements(build(module, 0).workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


def test_native_vectorized_ops_declares_the_baselines_work() -> None:
    """Only ``requires`` differs: the harness rates every variant by the baseline's bytes and flops."""
    base, native_w = load("baseline_vectorized_ops").WORKLOAD, load("optimized_vectorized_ops_native").NATIVE_WORKLOAD
    assert base.requires != native_w.requires
    assert (native_w.rows, native_w.cols, native_w.bytes, native_w.flops) == (base.rows, base.cols, base.bytes,
                                                                              base.flops)
    assert native_w.cols % 4 == 0  # affine_rows reads float4s


@pytest.mark.parametrize(("resident", "rows", "cols", "groups"), [
    (8 * 132, 2048, 131072, 8),    # the H200 size: 128 slices x 8 = 1,024 blocks of 1,056 places (the native: 9)
    (8 * 132, 2048, 32768, 33),    # 32 slices x 33 = 1,056: exactly one wave
    (8 * 132, 5, 32768, 5),        # at most one group per row
    (8 * 132, 2048, 1 << 22, 1),   # more slices than places: one group, several waves
    (0, 2048, 131072, -1),         # the occupancy API failed
])
def test_wave_variant_grid_fits_one_wave(resident: int, rows: int, cols: int, groups: int) -> None:
    assert load("optimized_vectorized_ops_wave").whole_wave_groups(resident, rows, cols) == groups
    slices = -(-cols // 4 // 256)
    assert groups == -1 or groups == 1 or slices * groups <= resident


def packed_lookup(codes: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """dequantize4's arithmetic: 4 int16 codes read as two little-endian 32-bit words, each code the
    word's low or high half masked to 13 bits."""
    words = codes.view(torch.int32).view(-1, 2).long() & 0xFFFFFFFF
    idx = torch.stack([words[:, 0] & 8191, (words[:, 0] >> 16) & 8191, words[:, 1] & 8191, (words[:, 1] >> 16) & 8191],
                      dim=1)
    return table[idx.reshape(-1)]


def test_packed_code_lookup_is_the_scalar_lookup() -> None:
    """Including negative codes (a refill draws over the codes' range; both kernels mask to 13 bits)."""
    gen = torch.Generator().manual_seed(0)
    codes, table = torch.randint(-8192, 8192, (4096,), dtype=torch.int16, generator=gen), torch.randn(8192)
    assert torch.equal(packed_lookup(codes, table), table[codes.long() & 8191])


def test_every_cuda_source_is_built_by_a_module() -> None:
    built = {src.name for module in LIBRARIES for src in library(module).sources}
    assert built == {p.name for p in CH06.glob("*.cu")}


@needs_nvcc
@pytest.mark.parametrize("module", sorted(LIBRARIES))
def test_library_builds_for_sm90_and_exports_its_entry_point(module: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    path = library(module).build("90")
    assert hasattr(ctypes.CDLL(str(path)), LIBRARIES[module])


def test_managed_buffer_stays_under_a_gibibyte() -> None:
    assert 4 * load("baseline_unified_memory_prefetch").WORKLOAD.n <= 1 << 30


def kernel_math(x: torch.Tensor, coef: torch.Tensor, steps: int, split: bool, limit: float | None) -> torch.Tensor:
    """ilp_accumulators.cu's arithmetic in x's dtype (a * b + c rounds twice where FFMA rounds once);
    limit None: without the clamp (the kernels before the fix)."""
    v = x if limit is None else x.clamp(-limit, limit)
    if not split:
        acc = torch.zeros_like(v)
        for k in range(steps):
            acc = acc * v + coef[k % 8]
        return acc
    v2 = v * v
    y, acc = (v2 * v2) * (v2 * v2), [torch.zeros_like(v) for _ in range(8)]
    for _ in range(steps // 8):
        acc = [a * y + c for a, c in zip(acc, coef, strict=True)]
    p = acc[0]
    for a in acc[1:]:
        p = p * v + a
    return p


def test_ilp_split_is_the_same_polynomial() -> None:
    """The 8-chain evaluation in y = x^8 equals the single Horner chain and the closed form."""
    ilp = load("baseline_ilp_accumulators")
    x = torch.linspace(-0.9, 0.9, 101, dtype=torch.float64)
    coef, steps = torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), 64
    chain = kernel_math(x, coef, steps, split=False, limit=0.9)
    torch.testing.assert_close(kernel_math(x, coef, steps, split=True, limit=0.9), chain, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ilp.closed_form(x, coef, steps, 0.9), chain.float(), rtol=1e-6, atol=1e-6)


def test_ilp_kernels_stay_finite_and_agree_on_refilled_inputs() -> None:
    """The harness's checked call refills x with normal values of x's mean and std, so some |x| > 1:
    without the clamp x^k overflows and the two orders disagree on Inf/NaN (the first H200 run's
    verify failure); clamped to the workload's limit both stay finite and match at fp32 tolerance."""
    ilp = load("baseline_ilp_accumulators")
    w, bench, gen = ilp.WORKLOAD, ilp.get_benchmark(), torch.Generator().manual_seed(0)
    bench.x, coef = ilp.draw_points(w, gen, torch.device("cpu")), torch.randn(8, generator=gen)
    refill(bench, seed=12345)
    assert float(bench.x.abs().max()) > 1.5
    steps = 2048  # past 1.1^931 > fp32 max; at |x| <= 0.9, terms older than ~160 steps are below fp32 eps
    with pytest.raises(VerificationError, match="NaN/Inf"):
        compare([("out", kernel_math(bench.x, coef, steps, False, None))],
                [("out", kernel_math(bench.x, coef, steps, True, None))], w)
    chain, split = (kernel_math(bench.x, coef, steps, s, w.limit) for s in (False, True))
    assert bool(torch.isfinite(chain).all()) and bool(torch.isfinite(split).all())
    compare([("out", chain)], [("out", split)], w)
    torch.testing.assert_close(chain, ilp.closed_form(bench.x, coef, w.steps, w.limit), rtol=1e-4, atol=1e-4)


def test_horner_reference_is_highest_degree_first() -> None:
    ref = load("baseline_launch_bounds").horner_reference
    x, coef = torch.tensor([0.5, -2.0]), torch.tensor([3.0, 0.0, -1.0])  # 3x^2 - 1
    assert torch.equal(ref(x, coef), torch.tensor([-0.25, 11.0]))


def test_first_kernels_grid_covers_the_matrix() -> None:
    assert load("first_kernels").grid_for(100, 37) == (3, 7)
    assert load("first_kernels").grid_for(32, 32) == (2, 2)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
def test_makefile_builds_the_first_kernels_program_for_the_given_arch() -> None:
    proc = subprocess.run(["make", "-B", "-n", "-C", str(CH06), "ARCH=90"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "bin/first_kernels_sm90" in proc.stdout and "code=[sm_90,compute_90]" in proc.stdout


def test_vector_add_declares_the_size_it_moves() -> None:
    """The workload's n is the size the kernels get and its bytes are 12 per element of that n (a
    size passed to vector_workload once landed only in the bytes, inflating the reported rate 4x)."""
    common = import_module_at(CH06 / "ch06_common.py")
    for n in (1 << 10, 1 << 27):
        w = common.vector_workload(n)
        assert w.n == n and w.bytes == 12.0 * n and w.items == n
    for side in ("baseline", "optimized"):
        bench = import_module_at(CH06 / f"{side}_vector_add.py").get_benchmark()
        assert bench.workload.n == 1 << 27 and bench.workload.bytes == 12.0 * (1 << 27)


def test_block_size_float4_variant_keeps_the_pairs_workload_and_block() -> None:
    """The float4 variant is rated by the pair's bytes (12 per element of the same 32M) and keeps the
    256-thread block the lesson recommends; only the launch differs."""
    base, full, vec = (load(m).get_benchmark() for m in ("baseline_block_size", "optimized_block_size",
                                                          "optimized_block_size_float4"))
    assert vec.workload == base.workload and vec.workload.bytes == 12.0 * vec.workload.n
    assert vec.workload.n % 4 == 0  # add_blocked4 reads float4s
    assert vec.block == full.block == 256
    assert type(vec).launch is not type(full).launch


def passes(words: list[int]) -> int:
    """Shared-memory passes (wavefronts) of one warp access: the most distinct 4-byte words any of
    the 32 banks must deliver (a word several lanes read is one broadcast)."""
    per_bank: dict[int, set[int]] = {}
    for w in words:
        per_bank.setdefault(w % 32, set()).add(w)
    return max(len(s) for s in per_bank.values())


def chunk_words(row: int, chunk: int, row_words: int, swizzle: bool) -> list[int]:
    """The 4 words of 16-byte chunk ``chunk`` of tile row ``row``: rows ``row_words`` apart (32, or
    32 + a pad), the chunk XOR-swizzled by row / 4 as bank_conflicts.cu's ``swizzled()``."""
    start = row * row_words + 4 * ((chunk ^ (row >> 2) & 7) if swizzle else chunk)
    return list(range(start, start + 4))


def swizzled_warp(row_words: int, swizzle: bool) -> dict[str, int]:
    """Worst passes of scores_swizzled's warp 0 (lane: tx = lane % 8, ty = lane / 8) over every chunk
    c and row offset b: K rows 4tx + b, Q rows 4ty + b; and of its tile stores (float4 f = lane + 64m
    to row f / 8, chunk f % 8)."""
    reads: dict[str, list[int]] = {"k": [], "q": []}
    for b, c in ((b, c) for b in range(4) for c in range(8)):
        rows = {"k": [4 * (lane % 8) + b for lane in range(32)], "q": [4 * (lane // 8) + b for lane in range(32)]}
        for name, lanes in rows.items():
            reads[name].append(passes([w for row in lanes for w in chunk_words(row, c, row_words, swizzle)]))
    stores = [passes([w for f in range(64 * m, 64 * m + 32) for w in chunk_words(f // 8, f % 8, row_words, swizzle)])
              for m in range(4)]
    return {"k": max(reads["k"]), "q": max(reads["q"]), "store": max(stores)}


def test_bank_model_counts_the_column_read_conflict() -> None:
    """The pair's own kernels: a K column ([32][32], word 32j + d) is 32 passes, padded (33j + d) one."""
    assert passes([32 * j + 5 for j in range(32)]) == 32
    assert passes([33 * j + 5 for j in range(32)]) == 1
    assert passes([7] * 32) == 1  # a broadcast


def test_swizzle_makes_16_byte_row_reads_conflict_free_where_no_pad_can() -> None:
    """scores_swizzled reads K rows 4 apart: unswizzled 8 passes, any 16-byte-aligned pad at least 4
    (rows 4 apart shift by 0 or 16 banks), the swizzle 1; its stores stay at the 4 passes 512 bytes need."""
    assert swizzled_warp(32, swizzle=True) == {"k": 1, "q": 1, "store": 4}
    assert swizzled_warp(32, swizzle=False)["k"] == 8
    assert min(swizzled_warp(32 + pad, swizzle=False)["k"] for pad in (4, 8, 12, 16, 20, 24, 28)) == 4
