"""Chapter 10, second half (clusters, cooperative launch, persistent and TMA Triton matmuls) without a
GPU: the pairs are discovered and document themselves, skip on a CPU with the reason, share their
workload and inputs; every .cu is a pair's library and builds (sm_90a for TMA multicast), and the
SASS holds what each optimized kernel is about while its baseline kernel does not: multicast TMA
loads (UTMALDG.2D.MULTICAST) beside wgmma (HGMMA) and cluster barriers (UCGABAR_*), and a
cooperative kernel that fits one 1,024-thread block per SM without spills."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from conftest import variant_modules

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH10 = Path(__file__).resolve().parents[1] / "ch10"
PAIRS = ("cluster_multicast", "dsmem_reduction", "cooperative_persistent", "persistent_matmul", "triton_tma")
LIBRARY_OF = {"cluster_multicast.cu": "baseline_cluster_multicast", "dsmem_reduction.cu": "baseline_dsmem_reduction",
              "cooperative_persistent.cu": "baseline_cooperative_persistent"}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump (CUDA toolkit or the 'sass' extra)")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.getbasetemp() / "ch10b-native"))


def load(module: str):
    return import_module_at(CH10 / f"{module}.py")


def test_the_harness_discovers_every_pair() -> None:
    found = set(variant_modules(CH10))
    assert {(f"baseline_{p}", f"optimized_{p}") for p in PAIRS} <= found


@pytest.mark.parametrize("pair", PAIRS)
def test_pair_files_document_themselves(pair: str) -> None:
    for side in ("baseline", "optimized"):
        doc = load(f"{side}_{pair}").__doc__ or ""
        for line in ("Baseline", "Optimized", "Expect", "Run:", f"ch10:{pair}"):
            assert line in doc, f"{side}_{pair} docstring lacks '{line}'"
        assert "not yet measured" in doc or "measured, H200" in doc, f"{side}_{pair}: say whether measured"


@pytest.mark.parametrize("pair", PAIRS)
def test_both_sides_share_workload_and_inputs_and_skip_on_cpu(pair: str) -> None:
    base, opt = (load(f"{side}_{pair}").get_benchmark() for side in ("baseline", "optimized"))
    assert base.workload is opt.workload and base.inputs == opt.inputs and base.inputs
    assert type(base) is not type(opt) and isinstance(opt, type(base))
    reason = unmet_requirements(opt.workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert opt.workload.requires.min_compute_capability == (9, 0) or pair == "cooperative_persistent"


def test_every_source_is_a_pair_library() -> None:
    assert {p.name for p in CH10.glob("*.cu")} >= set(LIBRARY_OF)
    for src, module in LIBRARY_OF.items():
        assert load(module).LIBRARY.sources == (CH10 / src,)


def kernels(sass: str) -> dict[str, str]:
    """SASS per kernel, keyed by the mangled name (``Function : _Z...``)."""
    parts = re.split(r"^\s*Function : (\S+)\s*$", sass, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def kernel(sass: str, name: str) -> str:
    found = [body for mangled, body in kernels(sass).items() if name in mangled]
    assert len(found) == 1, f"{name}: {len(found)} kernels in {sorted(kernels(sass))}"
    return found[0]


def sass_of(source: str) -> str:
    return load(LIBRARY_OF[source]).LIBRARY.sass("90")


@needs_nvcc
@pytest.mark.parametrize("source", sorted(LIBRARY_OF))
def test_library_builds_and_names_its_target(source: str) -> None:
    path = load(LIBRARY_OF[source]).LIBRARY.build("90")
    assert ("-sm90a-" if source == "cluster_multicast.cu" else "-sm90-") in path.name


@needs_sass
def test_multicast_kernel_loads_the_shared_tile_once_per_cluster() -> None:
    """Both are wgmma GEMMs fed by TMA; only the cluster one multicasts B and syncs the cluster, and
    its consumers' per-slice remote arrives carry no fence (the GPU-wide MEMBARs are the two
    cluster barriers' own, one per UCGABAR_ARV; .release.cluster would add one per arrive)."""
    sass = sass_of("cluster_multicast.cu")
    own, shared = kernel(sass, "gemm_mcILi1E"), kernel(sass, "gemm_mcILi2E")
    for body in (own, shared):
        assert "HGMMA.64x256x16.F32.BF16" in body and "UTMALDG.2D" in body and "USETMAXREG" in body
        assert "HMMA" not in body.replace("HGMMA", "")
    assert "UTMALDG.2D.MULTICAST" in shared and "UCGABAR_WAIT" in shared
    assert "SYNCS.ARRIVE.TRANS64.RED" in shared  # the remote arrive on a cluster peer's barrier
    assert "MULTICAST" not in own and "UCGABAR" not in own and ".RED" not in own
    assert shared.count("MEMBAR.ALL.GPU") == shared.count("UCGABAR_ARV") == 2
    assert "MEMBAR.ALL.GPU" not in own


@needs_sass
def test_multicast_kernels_have_the_registers_setmaxnreg_assumes() -> None:
    """384 threads x 168 registers = 128 x 40 (producer) + 256 x 232 (consumers), as gemm_ws.cu:
    compiled at fewer, the consumers' setmaxnreg.inc would wait for registers the pool lacks."""
    usage = {name: regs for name, (regs, _) in resource_usage("cluster_multicast.cu").items() if "gemm_mc" in name}
    assert len(usage) == 2 and set(usage.values()) == {168}, usage


@needs_sass
def test_cluster_kernel_syncs_the_cluster_and_two_pass_kernels_do_not() -> None:
    sass = sass_of("dsmem_reduction.cu")
    cluster = kernel(sass, "rms_cluster")
    assert "UCGABAR_ARV" in cluster and "UCGABAR_WAIT" in cluster
    assert "LD.E" in cluster  # the partials read through a generic (distributed shared) address
    for name in ("partial_sumsq", "normalize_rows"):
        assert "UCGABAR" not in kernel(sass, name)
    assert "LDG.E.128" in cluster  # x read as float4


def resource_usage(source: str) -> dict[str, tuple[int, int]]:
    """(registers per thread, local-memory bytes) per kernel of ``source``, from cuobjdump -res-usage."""
    text = load(LIBRARY_OF[source]).LIBRARY.resource_usage("90")
    found = re.findall(r"Function (\S+):\s*REG:(\d+) STACK:\d+ SHARED:\d+ LOCAL:(\d+)", text)
    return {name: (int(regs), int(local)) for name, regs, local in found}


@needs_sass
@pytest.mark.parametrize("source", sorted(LIBRARY_OF))
def test_kernels_do_not_spill(source: str) -> None:
    usage = resource_usage(source)
    assert usage and all(local == 0 for _, local in usage.values()), usage


@needs_sass
def test_one_cooperative_block_fits_an_sm() -> None:
    """cudaLaunchCooperativeKernel needs every block resident: 1,024 threads x registers <= 64K."""
    regs = [r for name, (r, _) in resource_usage("cooperative_persistent.cu").items() if "heat_persistent" in name]
    assert len(regs) == 1 and regs[0] * 1024 <= 65536, regs
