"""Chapter 7 pairs on the CPU: every pair is discovered and documents itself, CUDA-only pairs say why
they skip, and noncontiguous_views (the CPU-capable pair) matches its baseline, keeps its inputs and
really avoids the hidden copies it is about."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at

CH07 = Path(__file__).resolve().parents[1] / "ch07"
PAIRS = {p.name: p for p in pairs_in(CH07)}
EXPECTED = {"aos_to_soa", "misaligned_access", "transpose", "tiled_matmul", "l2_persistence", "async_copy",
            "tma_tile_copy", "noncontiguous_views"}
MODULES = sorted(m.stem for p in PAIRS.values() for m in (p.baseline, *p.optimized))
CPU = torch.device("cpu")


def load(module: str) -> ModuleType:
    return import_module_at(CH07 / f"{module}.py")


def build(module: str, seed: int = 0) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = CPU, seed
    return bench


def test_the_chapter_has_its_pairs() -> None:
    assert set(PAIRS) == EXPECTED
    assert all(p.problem is None for p in PAIRS.values())
    assert {o.stem for o in PAIRS["transpose"].optimized} == {"optimized_transpose_tiled", "optimized_transpose_padded"}
    assert {o.stem for o in PAIRS["tiled_matmul"].optimized} == {"optimized_tiled_matmul",
                                                                  "optimized_tiled_matmul_smem",
                                                                  "optimized_tiled_matmul_async",
                                                                  "optimized_tiled_matmul_paired",
                                                                  "optimized_tiled_matmul_cutlass"}
    assert {o.stem for o in PAIRS["noncontiguous_views"].optimized} == {"optimized_noncontiguous_views",
                                                                         "optimized_noncontiguous_views_fused",
                                                                         "optimized_noncontiguous_views_cluster",
                                                                         "optimized_noncontiguous_views_tma"}


@pytest.mark.parametrize("module", MODULES)
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"


@pytest.mark.parametrize("module", [m for m in MODULES if "noncontiguous" not in m])
def test_cuda_pairs_skip_with_reason_on_cpu(module: str) -> None:
    reason = unmet_requirements(build(module).workload.requires, CPU)
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("module", ["optimized_noncontiguous_views_fused", "optimized_noncontiguous_views_cluster",
                                    "optimized_noncontiguous_views_tma"])
def test_gpu_views_variants_skip_with_reason_on_cpu(module: str) -> None:
    reason = unmet_requirements(build(module).workload.requires, CPU)
    assert reason and "CUDA" in reason


def test_cluster_views_variant_needs_hopper() -> None:
    """Thread-block clusters and distributed shared memory exist from sm_90 on (plain sm_90, no wgmma)."""
    mod = load("optimized_noncontiguous_views_cluster")
    assert mod.get_benchmark().workload.requires.min_compute_capability == (9, 0)
    assert not mod.LIBRARY.needs_sm90a()


def test_tma_views_variant_is_the_cluster_kernels_library_on_hopper() -> None:
    """The TMA variant builds the cluster kernel's own source (one library, two entry points), so it
    shares its device functions; TMA and st.async need sm_90, not sm_90a."""
    tma, cluster = load("optimized_noncontiguous_views_tma"), load("optimized_noncontiguous_views_cluster")
    assert tma.LIBRARY == cluster.LIBRARY and not tma.LIBRARY.needs_sm90a()
    assert tma.get_benchmark().workload.requires.min_compute_capability == (9, 0)
    assert tma.SIGNATURES["views_rows_tma_run"] == cluster.SIGNATURES["views_rows_run"]


def test_noncontiguous_views_declare_the_bytes_the_result_needs() -> None:
    """8 bytes per element (x read once, out written once), not the eager chain's 48: a kernel that
    reads the view in place can reach the HBM ceiling, so the roofline must count what the result needs."""
    w = load("baseline_noncontiguous_views").WORKLOAD
    assert w.bytes == 8 * w.rows * w.cols == 536_870_912 and w.link == "hbm"
    for module in ("optimized_noncontiguous_views_fused", "optimized_noncontiguous_views_cluster",
                   "optimized_noncontiguous_views_tma"):
        assert build(module).workload.bytes == w.bytes


def test_without_cutlass_the_matmul_variant_names_the_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no CUTLASS headers are found, the CUTLASS variant's workload (aisp.kits.cutlass's shared
    SGEMM) requires the nvidia-cutlass wheel's module besides Hopper and nvcc: skipped, naming it."""
    from aisp.kits import cutlass

    base = load("baseline_tiled_matmul").WORKLOAD  # and ch07 first on sys.path, for the variant's imports
    monkeypatch.setattr(cutlass.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path))  # a folder without the headers
    # Executed afresh under another name: its workload is built at import, and the module the other
    # tests imported (headers found or not) stays as it was.
    spec = importlib.util.spec_from_file_location("tiled_matmul_cutlass_without_headers",
                                                  CH07 / "optimized_tiled_matmul_cutlass.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    w = mod.get_benchmark().workload
    assert w.requires.packages == ("cutlass_library",) and w.requires.min_compute_capability == (9, 0)
    reason = unmet_requirements(dataclasses.replace(w.requires, cuda=False, min_compute_capability=None), CPU)
    assert reason and "cutlass_library" in reason
    assert (w.flops, w.bytes, w.precision) == (base.flops, base.bytes, "fp32_simt")


def test_the_cutlass_matmul_variant_builds_the_shared_sgemm() -> None:
    """Its kernel is the package's, ch09:register_tiling's too (tests/test_ch09_cuda.py checks its SASS),
    not a source of this folder; it builds for plain sm_90 (a SIMT kernel: no wgmma)."""
    from aisp.kits import cutlass

    lib = load("optimized_tiled_matmul_cutlass").LIBRARY
    assert lib is cutlass.SGEMM and lib.sources[0].name == "cutlass_sgemm.cu"
    assert lib.sources[0].parent.name == "kits" and not lib.needs_sm90a()


def test_tma_pair_needs_hopper() -> None:
    for module in ("baseline_tma_tile_copy", "optimized_tma_tile_copy"):
        assert build(module).workload.requires.min_compute_capability == (9, 0)
    assert load("baseline_tma_tile_copy").LIBRARY.needs_sm90a()


@pytest.mark.parametrize("seed", [0, 1])
def test_noncontiguous_views_match_on_cpu(seed: int) -> None:
    outs = []
    for module in ("baseline_noncontiguous_views", "optimized_noncontiguous_views"):
        bench = build(module, seed)
        bench.setup()
        before = bench.x.clone()
        outs.append(bench.run())
        assert torch.equal(bench.x, before), f"{module} changed its input"
    assert outs[0].shape == outs[1].shape == (bench.x.shape[1], bench.x.shape[0])
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_noncontiguous_views_match_on_refilled_inputs() -> None:
    check_refilled_pair(build("baseline_noncontiguous_views"), build("optimized_noncontiguous_views"),
                        load("baseline_noncontiguous_views").WORKLOAD)


def count_copies(fn, x: torch.Tensor) -> int:
    """How many aten::copy_ calls (the hidden .contiguous() copies) ``fn(x)`` makes."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(x)
    return sum(e.count for e in prof.key_averages() if e.key == "aten::copy_")


def test_the_baseline_copies_three_times_the_optimized_once() -> None:
    row_features = load("baseline_noncontiguous_views").row_features
    x = torch.randn(64, 32)
    assert count_copies(lambda t: row_features(t.t()), x) == 3
    assert count_copies(lambda t: row_features(t.t().contiguous()), x) == 1


def test_stencil_reference_on_a_known_image() -> None:
    """The PyTorch stencil the CUDA kernels are checked against: 4 x - neighbours, zeros outside."""
    got = load("baseline_tma_tile_copy").stencil_reference(torch.ones(3, 3))
    assert torch.equal(got, torch.tensor([[2.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 2.0]]))
