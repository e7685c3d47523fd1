"""Chapter 2 pairs on the CPU: the harness finds the six pairs (two need two GPUs), every variant shares its baseline's
workload, documents itself and skips without a GPU with the reason; the logic that runs on a CPU
(padding the LM head, the L2-chunked passes) gives the baseline's answer; zero_copy.cu compiles
and p2p_direct.cu compile for sm_90 into 16-byte loads and stores."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at

CH02 = Path(__file__).resolve().parents[1] / "ch02"
PAIRS = ("l2_blocking", "p2p_copy_multigpu", "p2p_direct_access_multigpu", "small_copies",
         "tensor_core_alignment", "zero_copy")


def load(module: str):
    return import_module_at(CH02 / f"{module}.py")


def test_the_harness_discovers_the_six_pairs() -> None:
    assert sorted(p.name for p in pairs_in(CH02)) == sorted(PAIRS)


@pytest.mark.parametrize("name", PAIRS)
def test_variant_shares_workload_documents_itself_and_skips_on_cpu(name: str) -> None:
    base, opt = load(f"baseline_{name}"), load(f"optimized_{name}")
    bench = opt.get_benchmark()
    assert isinstance(bench, aisp.Benchmark) and bench.workload is base.WORKLOAD
    assert bench.inputs == base.get_benchmark().inputs and bench.inputs
    for doc in (base.__doc__, opt.__doc__):
        assert ("Expect (estimate, not yet measured" in doc or re.search(r"Expect \(measured, (2 x )?H200", doc)) and (
            f"aisp bench run -t ch02:{name}" in doc)
    assert "CUDA" in unmet_requirements(bench.workload.requires, torch.device("cpu"))


def test_padded_lm_head_gives_the_same_logits_on_cpu() -> None:
    base, opt = load("baseline_tensor_core_alignment"), load("optimized_tensor_core_alignment")
    small = base._workload(tokens=16, hidden=64, vocab=257)
    outs = []
    for bench in (base.get_benchmark(), opt.get_benchmark()):
        bench.workload, bench.device = small, torch.device("cpu")
        bench.setup()
        outs.append(bench.run())
    assert outs[1].shape == (16, 257) and opt.get_benchmark().workload.pad_to == 64
    torch.testing.assert_close(outs[1].float(), outs[0].float(), atol=2e-2, rtol=2e-2)


def test_padding_appends_zero_rows_to_a_multiple() -> None:
    opt = load("optimized_tensor_core_alignment")
    w = torch.ones(50257, 2)
    padded = opt.padded_rows(w, 64)
    assert padded.shape == (50304, 2) and padded[50257:].abs().sum() == 0
    assert opt.padded_rows(torch.ones(128, 2), 64).shape == (128, 2)


def test_chunked_passes_equal_whole_tensor_passes_bitwise() -> None:
    base = load("baseline_l2_blocking")
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0))
    whole, chunked = torch.empty_like(x), torch.full_like(x, float("nan"))
    base.passes(x, whole, 8)
    base.chunked_passes(x, chunked, 8, 1024)  # a last partial chunk of 784
    assert torch.equal(whole, chunked)
    assert torch.isfinite(whole).all() and whole.abs().max() < 4


def test_chunk_is_a_quarter_of_l2() -> None:
    opt = load("optimized_l2_blocking")
    assert opt.chunk_elements(60 * 2**20) == 15 * 2**20 // 4  # H200 as PyTorch reports it
    assert opt.chunk_elements(50 * 2**20) == 3_276_800       # H100: 12.5 MiB
    assert opt.chunk_elements(1000) == 1024


def test_multigpu_pairs_need_two_gpus() -> None:
    for name in PAIRS[1:3]:
        assert load(f"baseline_{name}").WORKLOAD.requires.gpus == 2


SASS_16_BYTE = ["optimized_zero_copy", "optimized_p2p_direct_access_multigpu", "optimized_small_copies_mapped"]
"""The pairs whose libraries test_kernels_compile_to_16_byte_loads_and_stores builds for sm_90 (nvcc and
cuobjdump): tests/test_kits_native.py leaves their sources out of its compile-only check."""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("module", SASS_16_BYTE)
def test_kernels_compile_to_16_byte_loads_and_stores(module: str) -> None:
    from aisp.kits import native

    if native.cuobjdump() is None:
        pytest.skip("cuobjdump not found")
    sass = load(module).LIBRARY.sass("90")
    assert "LDG.E.128" in sass and "STG.E.128" in sass


def test_l2_blocking_declares_the_l2_traffic_of_its_passes() -> None:
    """Each of the 8 passes reads and writes the 256 MiB fp32 tensor through L2: 4 GiB over link l2
    (priced at aisp peak's l2_bandwidth), recounted from the workload's own fields."""
    workload = load("baseline_l2_blocking").WORKLOAD
    assert workload.bytes == workload.passes * 2 * workload.elements * 4 == 4 * 2**30
    assert workload.link == "l2" and workload.flops == 0
    assert workload.ceiling_note.startswith("profiled (ncu, H200):") and len(workload.ceiling_note) < 160


def test_mapped_small_copies_documents_itself_and_shares_the_workload() -> None:
    opt = load("optimized_small_copies_mapped")
    bench = opt.get_benchmark()
    assert bench.workload is load("baseline_small_copies").WORKLOAD and bench.inputs == ("srcs",)
    assert "Expect: measured (H200 of a 2 x H200 host, 2026-11-30" in opt.__doc__ and "Estimated" in opt.__doc__
    assert "aisp bench run -t ch02:small_copies" in opt.__doc__
    assert "CUDA" in unmet_requirements(bench.workload.requires, torch.device("cpu"))


def test_mapped_small_copies_checks_what_its_kernel_assumes() -> None:
    """Host addresses in order for contiguous 16-byte-aligned fp32 tensors of the piece size;
    every other source refused before a kernel could read past or beside it."""
    addresses = load("optimized_small_copies_mapped").source_addresses
    srcs = [torch.randn(8) for _ in range(3)]
    assert addresses(srcs, 8).tolist() == [t.data_ptr() for t in srcs]
    assert addresses(srcs, 8).dtype == torch.int64
    bad = {"size": [torch.randn(8), torch.randn(12)], "dtype": [torch.randn(8, dtype=torch.float64)],
           "strided": [torch.randn(16)[::2]], "misaligned": [torch.randn(9)[1:]], "empty": []}
    for srcs in bad.values():
        with pytest.raises(ValueError, match="tensor|need"):
            addresses(srcs, 8)
    with pytest.raises(ValueError):
        addresses([torch.randn(6)], 6)  # not a multiple of 4 floats


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_mapped_small_copies_kernel_loads_before_storing_without_spills() -> None:
    """Per thread both 16-byte loads come before the first store (the piece requested at once),
    in registers only."""
    from aisp.kits import native

    if native.cuobjdump() is None:
        pytest.skip("cuobjdump not found")
    library = load("optimized_small_copies_mapped").LIBRARY
    usage = library.resource_usage("90")
    assert "gather_pieces_kernel" in usage and "LOCAL:0" in usage and "STACK:0" in usage
    ops = re.findall(r"\b(LDG\.E\.128|STG\.E\.128)", library.sass("90"))
    assert ops[:4] == ["LDG.E.128", "LDG.E.128", "STG.E.128", "STG.E.128"]
