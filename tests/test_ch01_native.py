"""ch01's CUDA C++ glue: finding cuBLAS, the pairs' libraries declared through aisp.kits.native
(no make), and (on a GPU) the built kernels checked against PyTorch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

CH01 = Path(__file__).resolve().parents[1] / "ch01"
sys.path.insert(0, str(CH01))
import find_cublas  # noqa: E402

from aisp.harness.loader import import_module_at  # noqa: E402
from aisp.kits import native  # noqa: E402

gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
NATIVE_PAIRS = ["baseline_gemm", "baseline_arithmetic_intensity", "baseline_coalescing"]


def fake_tree(root: Path, lib_dir: str, lib_name: str) -> None:
    (root / "include").mkdir(parents=True)
    (root / "include" / "cublas_v2.h").write_text("")
    (root / lib_dir).mkdir()
    (root / lib_dir / lib_name).write_text("")


def test_cublas_found_in_wheel_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(tmp_path / "cu13", "lib", "libcublas.so.13")
    monkeypatch.setattr(find_cublas, "_search_roots", lambda: [tmp_path])
    flags = find_cublas.cublas_flags()
    assert f"-I{tmp_path / 'cu13' / 'include'}" in flags
    assert "-l:libcublas.so.13" in flags
    assert f"-Xlinker=-rpath,{tmp_path / 'cu13' / 'lib'}" in flags


def test_cublas_found_in_toolkit_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(tmp_path, "lib64", "libcublas.so")
    monkeypatch.setattr(find_cublas, "_search_roots", lambda: [tmp_path])
    assert "-l:libcublas.so" in find_cublas.cublas_flags()


def test_no_cublas_gives_no_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cublas_v2.h").write_text("")
    monkeypatch.setattr(find_cublas, "_search_roots", lambda: [tmp_path])
    assert find_cublas.cublas_flags() == []


@pytest.mark.parametrize("module", NATIVE_PAIRS)
def test_native_pairs_build_through_the_kit_not_make(module: str) -> None:
    mod = import_module_at(CH01 / f"{module}.py")
    assert mod.WORKLOAD.requires == native.REQUIRES
    assert "make" not in mod.WORKLOAD.requires.executables
    assert "-DCH01_LIBRARY" in mod.LIBRARY.flags and not mod.LIBRARY.needs_sm90a()


def test_gemm_library_links_cublas() -> None:
    flags = import_module_at(CH01 / "baseline_gemm.py").LIBRARY.flags
    assert any(f.startswith(("-l:libcublas", "-lcublas")) for f in flags)


@gpu
@needs_cuda
@pytest.mark.parametrize("module", [*NATIVE_PAIRS, "optimized_cuda_graphs_pdl"])
def test_wrong_native_result_is_caught_in_setup(module: str) -> None:
    """Each native pair's setup() compares the CUDA C++ result with PyTorch's: a corrupted
    result must make it raise."""
    base = import_module_at(CH01 / f"{module}.py").get_benchmark()
    cls = type(base)

    class Corrupted(cls):  # type: ignore[misc, valid-type]
        def run(self) -> torch.Tensor:
            return super().run().mul_(1.01)

    bench = Corrupted()
    bench.device, bench.seed = torch.device("cuda"), 0
    with pytest.raises(AssertionError):
        bench.setup()


@gpu
@needs_cuda
@pytest.mark.parametrize("pdl", [True, False])
def test_layer_chain_graph_matches_torch_on_refilled_input(pdl: bool) -> None:
    """optimized_cuda_graphs_pdl's graph (and the same kernels without PDL) against PyTorch's eager
    layers, twice: then with h0 refilled in place and the scratch poisoned, so a stale read shows."""
    from ch01_common import capture

    bench = import_module_at(CH01 / "optimized_cuda_graphs_pdl.py").get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), 5
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    bench.setup()
    graph, _ = capture(lambda: bench.launch(pdl=pdl), bench.device)
    for _ in range(2):
        graph.replay()
        torch.testing.assert_close(bench.out.clone(), bench.layers(), rtol=1e-4, atol=1e-4)
        bench.h0.copy_(torch.randn_like(bench.h0))
        bench.out.fill_(float("nan"))
        bench.t.fill_(float("nan"))
    figures = bench.metrics()
    assert set(figures) == {"us_per_kernel", "us_per_kernel_no_pdl"} and min(figures.values()) > 0
    bench.teardown()
