"""Chapter 10, second half, on a GPU: every pair's variants match (each also checks itself against
PyTorch in setup(); the CUDA pairs bit for bit, as their headers claim) and pass the harness's
refill check, and the kernels are right at small shapes: a K loop shorter and longer than the
multicast GEMM's 4-stage ring (its phases wrapping once and several times; also at its full size,
and bit for bit with and without the cluster), heat chunks that leave trailing blocks empty, one
step and odd step counts, a few rows, a persistent grid that does not divide the tiles."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair

import aisp
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH10 = Path(__file__).resolve().parents[1] / "ch10"
PAIRS = ("cluster_multicast", "dsmem_reduction", "cooperative_persistent", "persistent_matmul", "triton_tma")
BIT_EXACT = {"cluster_multicast", "dsmem_reduction", "cooperative_persistent"}
pytestmark = pytest.mark.gpu


def load(module: str) -> ModuleType:
    return import_module_at(CH10 / f"{module}.py")


def bench(module: str, seed: int = 3) -> aisp.Benchmark:
    b = load(module).get_benchmark()
    b.device, b.seed = torch.device("cuda"), seed
    return b


def outputs(module: str) -> torch.Tensor:
    b = bench(module)
    b.setup()
    try:
        return b.run().detach().clone()
    finally:
        b.teardown()


def skip_unless_hopper() -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs compute capability 9.0")


@pytest.mark.parametrize("pair", PAIRS)
def test_pair_matches_on_gpu(pair: str) -> None:
    skip_unless_hopper()
    ref, got = outputs(f"baseline_{pair}"), outputs(f"optimized_{pair}")
    if pair in BIT_EXACT:
        assert torch.equal(got, ref), f"{pair}: max |diff| {(got.float() - ref.float()).abs().max():.3e}"
    else:
        torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
    torch.cuda.empty_cache()


@pytest.mark.parametrize("pair", PAIRS)
def test_pair_passes_the_refill_check(pair: str) -> None:
    skip_unless_hopper()
    check_refilled_pair(bench(f"baseline_{pair}", 0), bench(f"optimized_{pair}", 0), load(f"baseline_{pair}").WORKLOAD)
    torch.cuda.empty_cache()


COMMON = import_module_at(CH10 / "ch10b_common.py")
INT, PTR, FLOAT, ptr = COMMON.INT, COMMON.PTR, COMMON.FLOAT, native.ptr
ENTRY = {"baseline_cluster_multicast": ("mc_gemm_run", [INT, PTR, PTR, PTR, INT, INT, INT, PTR]),
         "baseline_dsmem_reduction": ("rms_rows_run", [INT, PTR, PTR, PTR, INT, INT, FLOAT, PTR]),
         "baseline_cooperative_persistent": ("heat_run", [INT, PTR, PTR, PTR, PTR, INT, INT, FLOAT, PTR])}


def entry(module: str):
    """The C entry point of the library a pair's baseline declares, loaded for this GPU."""
    name, argtypes = ENTRY[module]
    return getattr(load(module).LIBRARY.load(torch.device("cuda"), {name: argtypes}), name)


def multicast_gemm(cluster: int, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, B, C) with C from cluster_multicast.cu's kernel (1: own copies, 2: B shared by multicast)."""
    run = entry("baseline_cluster_multicast")
    a, b = torch.randn(m, k, device="cuda").bfloat16(), torch.randn(n, k, device="cuda").bfloat16()
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    native.check(run(cluster, ptr(a), ptr(b), ptr(out), m, n, k, native.stream()), "mc_gemm_run")
    torch.cuda.synchronize()
    return a, b, out


# A ring of 4 stages: K loops shorter than it, wrapping once and several times; 5 pair rows (a
# partial group of the grouped order); the full 8192^3 size of the pair.
@pytest.mark.parametrize(("m", "n", "k"), [(256, 256, 64), (256, 512, 192), (512, 768, 64 * 11),
                                           (1280, 512, 64 * 19), (8192, 8192, 8192)])
@pytest.mark.parametrize("cluster", [1, 2])
def test_multicast_gemm_matches_torch(m: int, n: int, k: int, cluster: int) -> None:
    skip_unless_hopper()
    a, b, out = multicast_gemm(cluster, m, n, k)
    want = a.float() @ b.float().T
    error = float((out.float() - want).norm() / want.norm())
    assert error < 1e-2, f"relative L2 error {error:.2e}"
    assert not out.isnan().any()
    if m * n <= 1 << 20:
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize(("m", "n", "k"), [(512, 768, 64 * 11), (8192, 8192, 8192)])
def test_multicast_gemm_is_bit_exact_with_own_copies(m: int, n: int, k: int) -> None:
    skip_unless_hopper()
    torch.manual_seed(0)
    _, _, own = multicast_gemm(1, m, n, k)
    torch.manual_seed(0)
    _, _, shared = multicast_gemm(2, m, n, k)
    assert torch.equal(own, shared)


def test_multicast_gemm_refuses_shapes_off_its_tiles() -> None:
    skip_unless_hopper()
    run = entry("baseline_cluster_multicast")
    a, b = torch.zeros(512, 128, device="cuda").bfloat16(), torch.zeros(512, 128, device="cuda").bfloat16()
    out = torch.zeros(512, 512, device="cuda", dtype=torch.bfloat16)
    for cluster, m, n, k in [(2, 128, 512, 128), (2, 512, 128, 128), (2, 512, 512, 96), (3, 512, 512, 128)]:
        assert run(cluster, ptr(a), ptr(b), ptr(out), m, n, k, native.stream()) == -1, (cluster, m, n, k)


@pytest.mark.parametrize(("n", "steps"), [(1000, 1), (1000, 7), (50_000, 64), (1 << 21, 3)])
@pytest.mark.parametrize("persistent", [0, 1])
def test_heat_small_shapes(n: int, steps: int, persistent: int) -> None:
    mod, run = load("baseline_cooperative_persistent"), entry("baseline_cooperative_persistent")
    u0 = torch.randn(n, device="cuda")
    out, tmp = torch.full_like(u0, float("nan")), torch.empty_like(u0)
    halo = torch.empty(4 * torch.cuda.get_device_properties(0).multi_processor_count, device="cuda")
    native.check(run(persistent, ptr(u0), ptr(out), ptr(tmp), ptr(halo), n, steps, 0.25, native.stream()),
                 "heat_run")
    torch.cuda.synchronize()
    torch.testing.assert_close(out, mod.heat_reference(u0, steps, 0.25), rtol=1e-4, atol=1e-5)


def test_heat_refuses_a_field_too_large_for_shared_memory() -> None:
    run = entry("baseline_cooperative_persistent")
    n = 20_000 * torch.cuda.get_device_properties(0).multi_processor_count
    u0 = torch.zeros(n, device="cuda")
    assert run(1, ptr(u0), ptr(u0), ptr(u0), ptr(u0), n, 1, 0.25, native.stream()) == -3


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("use_cluster", [0, 1])
def test_rms_rows_few_rows(rows: int, use_cluster: int) -> None:
    skip_unless_hopper()
    mod, run = load("baseline_dsmem_reduction"), entry("baseline_dsmem_reduction")
    x = torch.randn(rows, 65536, device="cuda") * torch.arange(1, rows + 1, device="cuda")[:, None]
    y, partials = torch.full_like(x, float("nan")), torch.empty(rows, 8, device="cuda")
    native.check(run(use_cluster, ptr(x), ptr(y), ptr(partials), rows, 65536, 1e-6, native.stream()), "rms")
    torch.cuda.synchronize()
    torch.testing.assert_close(y, mod.rms_reference(x, 1e-6), rtol=1e-5, atol=1e-5)
    assert run(use_cluster, ptr(x), ptr(y), ptr(partials), rows, 4096, 1e-6, native.stream()) == -1


@pytest.mark.parametrize("programs", [1, 5, 132])
def test_persistent_matmul_any_program_count(programs: int) -> None:
    skip_unless_hopper()
    t = import_module_at(CH10 / "ch10b_triton.py")
    a, b = torch.randn(384, 256, device="cuda").bfloat16(), torch.randn(256, 1024, device="cuda").bfloat16()
    c = torch.full((384, 1024), float("nan"), device="cuda", dtype=torch.bfloat16)
    t.launch("persistent", a, b, c, programs)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)
