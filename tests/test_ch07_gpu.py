"""Chapter 7 on a GPU: every pair's variants match each other (each also checked itself against PyTorch
in setup(); a variant whose requirements are unmet here, such as the CUTLASS matmul without its headers,
is skipped with the reason), the kernels are right at small and ragged shapes (edges, heads and tails,
image borders), and the persisting-L2 set-aside is granted and given back."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import pytest
import torch

from aisp.harness import settings
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH07 = Path(__file__).resolve().parents[1] / "ch07"
PAIRS = [(p.baseline.stem, o.stem) for p in pairs_in(CH07) for o in p.optimized]
COMMON = import_module_at(CH07 / "ch07_common.py")
INT, LONG, PTR = COMMON.INT, COMMON.LONG, COMMON.PTR
pytestmark = pytest.mark.gpu


def load(module: str) -> ModuleType:
    return import_module_at(CH07 / f"{module}.py")


def outputs(module: str, seed: int = 3) -> torch.Tensor:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    bench.setup()
    try:
        return bench.run().detach().clone()
    finally:
        bench.teardown()


@pytest.mark.parametrize(("baseline", "optimized"), PAIRS)
def test_pair_matches_on_gpu(baseline: str, optimized: str) -> None:
    reason = unmet_requirements(load(optimized).get_benchmark().workload.requires, torch.device("cuda"))
    if reason:  # compute capability 9.0 (TMA, clusters); CUTLASS's headers (the _cutlass matmul)
        pytest.skip(f"{optimized}: {reason}")
    ref = outputs(baseline)
    torch.testing.assert_close(outputs(optimized), ref, rtol=1e-5, atol=1e-5)
    torch.cuda.empty_cache()


def library(module: str, signatures: dict[str, list]) -> ctypes.CDLL:
    """The CUDA library a pair's baseline declares, loaded for this GPU."""
    return load(module).LIBRARY.load(torch.device("cuda"), signatures)


def call(status: int) -> None:
    native.check(status, "ch07 kernel")
    torch.cuda.synchronize()


def test_peeled_copy_every_offset_and_length() -> None:
    handle = library("baseline_misaligned_access", load("baseline_misaligned_access").SIGNATURES)
    x = torch.randn(64, device="cuda")
    for offset in range(4):
        for n in (0, 1, 2, 3, 4, 5, 7, 8, 9, 17, 33):
            out = torch.full_like(x, float("nan"))
            call(handle.copy_peeled_run(x[offset:].data_ptr(), out[offset:].data_ptr(), n, native.stream()))
            assert torch.equal(out[offset:offset + n], x[offset:offset + n]), (offset, n)
            assert out[offset + n:].isnan().all() and out[:offset].isnan().all(), (offset, n)
    assert handle.copy_peeled_run(x[1:].data_ptr(), x[2:].data_ptr(), 8, native.stream()) == -1


def test_transpose_non_square() -> None:
    handle = library("baseline_transpose", {"transpose_run": [INT, PTR, PTR, INT, INT, PTR]})
    x = torch.randn(64, 96, device="cuda")
    for mode in range(3):
        out = torch.empty(96, 64, device="cuda")
        call(handle.transpose_run(mode, x.data_ptr(), out.data_ptr(), 64, 96, native.stream()))
        assert torch.equal(out, x.t()), mode


@pytest.mark.parametrize(("m", "n", "k"), [(256, 128, 96), (128, 384, 32), (384, 256, 160)])
def test_matmul_small_shapes(m: int, n: int, k: int) -> None:
    """Every mode against fp64 off the square (k = 32: four slices, the fewest); the cp.async kernels
    (mode 3, and mode 4 with paired lanes) bit for bit equal to regblock (mode 2): same products,
    same order, same fmaf."""
    handle = library("baseline_tiled_matmul", {"matmul_run": [INT, PTR, PTR, PTR, INT, INT, INT, PTR]})
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    got = []
    for mode in range(5):
        c = torch.full((m, n), float("nan"), device="cuda")
        call(handle.matmul_run(mode, a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, native.stream()))
        torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-5, atol=1e-4)
        got.append(c)
    assert torch.equal(got[3], got[2]) and torch.equal(got[4], got[2])


@pytest.mark.parametrize(("m", "n", "k"), [(256, 128, 96), (128, 384, 32), (384, 256, 160), (200, 136, 44)])
def test_cutlass_sgemm_small_and_ragged_shapes(m: int, n: int, k: int) -> None:
    """The shared CUTLASS SGEMM (the _cutlass variant's, aisp.kits.cutlass) against fp64, its 128 x 256
    block tiles cut at the edges (the last shape divides no tile); where the chapter's kernels run, bit
    for bit equal to matmul_naive: the same FFMAs in the same k order from zero (read from CUTLASS's
    source: this test is what checks it)."""
    from aisp.kits import cutlass

    if reason := unmet_requirements(cutlass.requirements(), torch.device("cuda")):
        pytest.skip(reason)
    handle = cutlass.SGEMM.load(torch.device("cuda"), {"cutlass_sgemm": [PTR, PTR, PTR, INT, INT, INT, PTR]})
    cutlass.check_headers(handle, cutlass.SGEMM)
    a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda")
    call(handle.cutlass_sgemm(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, native.stream()))
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-5, atol=1e-4)
    if m % 128 == 0 and n % 128 == 0 and k % 32 == 0:  # matmul_run's shapes
        naive = library("baseline_tiled_matmul", {"matmul_run": [INT, PTR, PTR, PTR, INT, INT, INT, PTR]})
        want = torch.full_like(c, float("nan"))
        call(naive.matmul_run(0, a.data_ptr(), b.data_ptr(), want.data_ptr(), m, n, k, native.stream()))
        assert torch.equal(c, want)


def test_cumsum_few_rows_and_tiles() -> None:
    handle = library("baseline_async_copy", {"cumsum_rows_run": [INT, PTR, PTR, INT, LONG, PTR]})
    for tiles in (1, 2, 7, 8, 9, 20):  # fewer tiles than the 8 stages, as many, more
        x = torch.randn(3, 1024 * tiles, device="cuda")
        for pipelined in (0, 1):
            out = torch.empty_like(x)
            call(handle.cumsum_rows_run(pipelined, x.data_ptr(), out.data_ptr(), 3, x.shape[1], native.stream()))
            torch.testing.assert_close(out, x.double().cumsum(1).float(), rtol=1e-5, atol=1e-4)


def test_stencil_borders_both_ways() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA needs sm_90 or later")
    m = load("baseline_tma_tile_copy")
    handle = library("baseline_tma_tile_copy", {"stencil_run": [INT, PTR, PTR, INT, INT, PTR]})
    for rows, cols in ((32, 64), (96, 192)):
        x = torch.randn(rows, cols, device="cuda")
        for use_tma in (0, 1):
            out = torch.full_like(x, float("nan"))
            call(handle.stencil_run(use_tma, x.data_ptr(), out.data_ptr(), rows, cols, native.stream()))
            torch.testing.assert_close(out, m.stencil_reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 31, 32, 33, 255, 256, 257, 1000])
def test_hinted_gather_ragged_rows(rows: int) -> None:
    """gather_add_hints (evict_first x and out) equals x + table[idx] and gather_add bit for bit at row
    counts off the 32-row block, touching no row past the last (out's tail stays NaN)."""
    handle = library("baseline_l2_persistence", load("baseline_l2_persistence").SIGNATURES)
    x, table = torch.randn(rows, 32, device="cuda"), torch.randn(97, 32, device="cuda")
    idx = torch.randint(0, 97, (rows,), device="cuda", dtype=torch.int32)
    outs = []
    for run in (handle.gather_add_run, handle.gather_add_hints_run):
        out = torch.full((rows + 8, 32), float("nan"), device="cuda")
        call(run(x.data_ptr(), table.data_ptr(), idx.data_ptr(), out.data_ptr(), rows, native.stream()))
        assert out[rows:].isnan().all(), run
        outs.append(out[:rows])
    torch.testing.assert_close(outs[0], x + table[idx.long()], rtol=0, atol=0)
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)


def test_persisting_l2_set_aside_is_granted_and_restored() -> None:
    """The driver rounds the set-aside up to its granularity (33.75 MiB for 32 MiB asked on an H200):
    granted is at least what was asked, at most the device's maximum, and given back afterwards. Put
    back by the harness's guard between calls, each call sets it again, with the same result."""
    handle = library("baseline_l2_persistence", {"l2_persisting_limit": [], "l2_persisting_max": []})
    handle.l2_persisting_limit.restype = handle.l2_persisting_max.restype = ctypes.c_size_t
    before, most = handle.l2_persisting_limit(), handle.l2_persisting_max()
    bench = load("l2_persistence_window").get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), 0
    bench.setup()
    try:
        asked = min(bench.table.numel() * bench.table.element_size(), most)
        granted = handle.l2_persisting_limit()
        assert 0 < asked <= granted <= most
        assert bench.metrics()["persisting_l2_mib"] * 2**20 == granted
        first = bench.run().clone()
        settings.write_persisting_l2(before)  # what the harness does before another variant's call
        assert handle.l2_persisting_limit() == before
        torch.testing.assert_close(bench.run(), first, rtol=0, atol=0)
        assert handle.l2_persisting_limit() == granted
    finally:
        bench.teardown()
    assert handle.l2_persisting_limit() == before


def test_noncontiguous_views_copy_counts_on_gpu() -> None:
    """On CUDA too, each of the three ops copies the transposed view; the optimized side copies once."""
    pairs_test = import_module_at(Path(__file__).resolve().parent / "test_ch07_pairs.py")
    row_features = load("baseline_noncontiguous_views").row_features
    x = torch.randn(256, 128, device="cuda")
    assert pairs_test.count_copies(lambda t: row_features(t.t()), x) == 3
    assert pairs_test.count_copies(lambda t: row_features(t.t().contiguous()), x) == 1


def test_strided_row_features_on_gpu() -> None:
    """The fused Triton kernel against the eager row_features of the transposed view: ragged tiles,
    a view whose row stride exceeds its width, and the pair's own block sizes."""
    pytest.importorskip("triton")
    views = load("ch07_views")
    row_features = load("baseline_noncontiguous_views").row_features
    wide = torch.randn(1000, 300, device="cuda")
    for x in (torch.randn(1000, 200, device="cuda"), torch.randn(8192, 48, device="cuda") * 4, wide[:, 7:250]):
        out = views.strided_row_features(x, torch.full((x.shape[1], x.shape[0]), float("nan"), device="cuda"))
        torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)


def skewed_and_wide_views() -> tuple[torch.Tensor, torch.Tensor]:
    """The views kernels' hard inputs: v-rows whose max sits far above their mean (4096 x 64), and a wide
    matrix whose column slices give row strides larger than the width (1024 x 160)."""
    skewed = 3 * torch.randn(4096, 64, device="cuda") + 2
    skewed[:100, 5] = -1e4
    skewed[3000:, 6] = 50.0
    skewed[:, 7] += 100.0
    return skewed, torch.randn(1024, 160, device="cuda")


def test_views_cluster_on_gpu() -> None:
    """The cluster kernel (x read once, a column split over 8 blocks) against the eager row_features of
    the transposed view: the pair's 8,192 rows (1,024 a block) and the fewest (512, 64 a block), a view
    whose row stride exceeds its width and starts 16 columns in, a v-row whose max sits far above its
    mean, one with a large shared offset, and every output element written (out starts as NaN). Shapes
    it cannot index are refused before launching."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")
    mod = load("optimized_noncontiguous_views_cluster")
    handle = mod.LIBRARY.load(torch.device("cuda"), mod.SIGNATURES)
    row_features = load("baseline_noncontiguous_views").row_features
    skewed, wide = skewed_and_wide_views()
    for x in (torch.randn(8192, 48, device="cuda") * 4, torch.randn(512, 16, device="cuda"), wide[:, 16:112], skewed):
        out = mod.cluster_row_features(handle, x, torch.full((x.shape[1], x.shape[0]), float("nan"), device="cuda"))
        torch.cuda.synchronize()
        torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)
    for bad in (torch.randn(1000, 16, device="cuda"), torch.randn(512, 40, device="cuda"), wide[:, 1:17]):
        with pytest.raises(RuntimeError, match="status -1"):
            mod.cluster_row_features(handle, bad, torch.empty(bad.shape[1], bad.shape[0], device="cuda"))


def test_views_tma_on_gpu() -> None:
    """The TMA kernel (the cluster kernel's math, tiles loaded by TMA, partials pushed by st.async) is
    bitwise the cluster kernel on the cluster test's shapes (every box count from 1 to 16: 512 to
    8,192 rows; a strided view starting 16 columns in; skewed v-rows) and on the pair's 8192 x 8192,
    writes every element (out starts as NaN), stays close to the eager row_features, runs twice in a
    row on the same buffers (its mbarriers are one-use per launch) and refuses what it cannot index."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA and thread-block clusters need compute capability 9.0")
    tma, cluster = load("optimized_noncontiguous_views_tma"), load("optimized_noncontiguous_views_cluster")
    handle = tma.LIBRARY.load(torch.device("cuda"), {**tma.SIGNATURES, **cluster.SIGNATURES})
    row_features = load("baseline_noncontiguous_views").row_features
    skewed, wide = skewed_and_wide_views()
    shapes = (torch.randn(8192, 48, device="cuda") * 4, torch.randn(512, 16, device="cuda"),
              torch.randn(2560, 32, device="cuda"), wide[:, 16:112], skewed, torch.randn(8192, 8192, device="cuda"))
    for x in shapes:
        ref = cluster.cluster_row_features(handle, x, torch.empty(x.shape[1], x.shape[0], device="cuda"))
        for _ in range(2):
            out = tma.tma_row_features(handle, x, torch.full((x.shape[1], x.shape[0]), float("nan"), device="cuda"))
            torch.cuda.synchronize()
            assert torch.equal(out, ref), (tuple(x.shape), (out - ref).abs().max().item())
        torch.testing.assert_close(out, row_features(x.t()), rtol=1e-5, atol=1e-5)
    for bad in (torch.randn(1000, 16, device="cuda"), torch.randn(512, 40, device="cuda"), wide[:, 1:17]):
        with pytest.raises(RuntimeError, match="status -1"):
            tma.tma_row_features(handle, bad, torch.empty(bad.shape[1], bad.shape[0], device="cuda"))
