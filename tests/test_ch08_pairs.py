"""Chapter 8 on a CPU: every pair is discovered and documents itself, every pair skips with its
reason (all need a GPU), every CUDA C++ library builds for sm_90 with its entry points, and the SASS
holds what each pair is about: local memory in register_spill's baseline and none in its optimized
kernel, whose loads run 4 outputs (128 FFMA) or more ahead of their first use within 72 registers,
coefficient loads only in loop_unrolling's runtime loop, half the FMAs in predication's branch-free
kernel, HFMA2 in half2_math, at most 32 registers in tail_effect (two blocks per SM)
and 4 x 128 FFMA, at least 93% of each of its kernels' loop; in predication at most 32 registers
(eight 256-thread blocks per SM) and 4 chains a step (x 2 sides in the branch), at least 93% of
each loop, the next step's loads issued with at least a chain's FFMA still to run."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import pytest
import torch

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH08 = Path(__file__).resolve().parents[1] / "ch08"
PAIRS = ["half2_math", "ilp_vs_occupancy", "loop_unrolling", "predication", "register_spill",
         "smem_occupancy", "tail_effect", "triton_autotune"]
ENTRY_POINTS = {"softmax_smem.cu": ("softmax_init", "softmax_run", "softmax_blocks_per_sm"),
                "fir_spill.cu": ("fir_run",), "horner_unroll.cu": ("horner_run",), "odd_branch.cu": ("odd_run",),
                "half2_poly.cu": ("half2_run",), "tail_waves.cu": ("tail_run", "tail_persistent_grid"),
                "saxpy_ilp.cu": ("saxpy_run", "saxpy_info")}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="nvcc or cuobjdump is missing")
VARIANTS = ["optimized_half2_math_ilp", "optimized_register_spill_strip64"]
"""Further optimized files of a pair, measured beside the pair's optimized file."""
MODULES = [f"{side}_{name}" for name in PAIRS for side in ("baseline", "optimized")] + VARIANTS


def load(module: str):
    return import_module_at(CH08 / f"{module}.py")


def test_discovery_finds_exactly_the_chapter_pairs() -> None:
    assert sorted(p.name for p in pairs_in(CH08)) == PAIRS


def test_variants_belong_to_their_pairs() -> None:
    found = {p.name: {o.stem for o in p.optimized} for p in pairs_in(CH08)}
    assert found["register_spill"] == {"optimized_register_spill", "optimized_register_spill_strip64"}
    assert found["half2_math"] == {"optimized_half2_math", "optimized_half2_math_ilp"}


def test_register_spill_strip_variant_fits_the_kernel() -> None:
    """fir_run refuses a strip that is not a multiple of 32 dividing the rows (-1)."""
    w, strip = load("baseline_register_spill").WORKLOAD, load("optimized_register_spill_strip64").ShortStripFir.strip
    assert strip < w.strip and strip % w.taps == 0 and w.rows % strip == 0
    assert load("baseline_register_spill").RingBufferFir.strip == w.strip


def test_every_cuda_source_is_listed() -> None:
    assert sorted(p.name for p in CH08.glob("*.cu")) == sorted(ENTRY_POINTS)


@pytest.mark.parametrize("module", MODULES)
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"


@pytest.mark.parametrize("module", MODULES)
def test_pair_skips_on_cpu_with_reason(module: str) -> None:
    reason = unmet_requirements(load(module).get_benchmark().workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@needs_nvcc
@pytest.mark.parametrize("source", sorted(ENTRY_POINTS))
@pytest.mark.usefixtures("fresh_native_cache")
def test_library_builds_for_sm90_with_its_entry_points(source: str) -> None:
    lib = ctypes.CDLL(str(native.Library((CH08 / source,)).build("90")))
    for name in ENTRY_POINTS[source]:
        assert hasattr(lib, name), f"{source} does not export {name}"


def functions(source: str) -> dict[str, str]:
    """SASS per kernel (demangled name prefix -> body) of a chapter library built for sm_90."""
    sass = native.Library((CH08 / source,)).sass("90")
    parts = re.split(r"\n\s*Function : ", sass)[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def kernel(source: str, name: str) -> str:
    found = [body for fn, body in functions(source).items() if name in fn]
    assert len(found) == 1, f"{name} not found once in {source}: {list(functions(source))}"
    return found[0]


def count(body: str, opcode: str) -> int:
    return len(re.findall(rf"\b{opcode}\b", body))


@needs_sass
def test_register_spill_baseline_uses_local_memory_and_optimized_none() -> None:
    ring, shift = kernel("fir_spill.cu", "fir_ring"), kernel("fir_spill.cu", "fir_shift")
    assert count(ring, "LDL") >= 16 and count(ring, r"STL(\.\d+)?") >= 1
    assert "LDL" not in shift and "STL" not in shift


@needs_sass
def test_loop_unrolling_folds_the_coefficients_into_ffma() -> None:
    runtime, fixed = kernel("horner_unroll.cu", "horner_runtime"), kernel("horner_unroll.cu", "horner_fixed")
    assert count(fixed, "FFMA") == 256 and count(fixed, r"LDG\.E[.\w]*") == 1
    assert count(runtime, r"LDG\.E[.\w]*") >= 16 and count(runtime, "FFMA") < 64


@needs_sass
def test_predication_select_issues_half_the_ffma_of_the_branch() -> None:
    branchy, select = kernel("odd_branch.cu", "odd_branchy"), kernel("odd_branch.cu", "odd_select")
    # 128 FFMA per element on each path: 4 elements in the loop's step, 1 in the leftover loop
    assert count(branchy, "FFMA") == 2 * count(select, "FFMA") == 2 * 5 * 128
    assert count(select, "FSEL") >= 1 and count(branchy, "FSEL") == 0


@needs_sass
def test_half2_math_uses_packed_hfma2() -> None:
    fp32, half2 = kernel("half2_poly.cu", "poly_fp32"), kernel("half2_poly.cu", "poly_half2PK")
    assert count(fp32, "FFMA") == 256
    assert count(half2, "HFMA2") >= 128 and count(half2, "FFMA") == 0


@needs_nvcc
@pytest.mark.usefixtures("fresh_native_cache")
def test_half2_run_refuses_what_it_cannot_launch() -> None:
    """Refused (-1) before any CUDA call: mode 2's uint4 vectors need 16-byte pointers, modes 0 and 1
    four; an unknown mode (3: the removed _dyn's, then _pinned's) is refused, not run as another. What passes the
    checks reaches CUDA, which on a machine without a GPU answers a CUDA error code, never -1."""
    run = ctypes.CDLL(str(native.Library((CH08 / "half2_poly.cu",)).build("90"))).half2_run
    run.argtypes, run.restype = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p], ctypes.c_int
    for mode, x, y, n in [(2, 4096 + 4, 8192, 64), (2, 4096, 8192 + 8, 64), (1, 4096 + 2, 8192, 64),
                          (3, 4096, 8192, 64), (0, 4096, 8192, 63),
                          (4, 4096, 8192, 64), (-1, 4096, 8192, 64)]:
        assert run(mode, x, y, n, None) == -1, (mode, x, y, n)
    if not torch.cuda.is_available():
        assert all(run(mode, 4096, 8192, 64, None) not in (0, -1) for mode in (0, 1, 2))


@needs_sass
def test_half2_ilp_loop_is_four_packed_chains() -> None:
    """poly_half2_ilp's loop: 4 chains of 128 HFMA2, half in each form (both fp16 pipes), at least 93%
    of the loop; one 16-byte load, issued with at least 3 chains' HFMA2 still to run (the next
    vector's, ahead of the chains), one 16-byte store. poly_half2's one chain: 64 + 65 of the two forms."""
    loop = hot_loop(kernel("half2_poly.cu", "poly_half2_ilp"))
    text = "\n".join(loop)
    hfma2, mma = count(text, r"HFMA2(\.MMA)?"), count(text, r"HFMA2\.MMA")
    assert hfma2 == 4 * 128 and mma == 2 * 128 and hfma2 >= 0.93 * len(loop), f"{hfma2} HFMA2 of {len(loop)}"
    loads = [k for k, op in enumerate(loop) if re.search(r"\bLDG\.E\.128\b", op)]
    assert len(loads) == 1 and count(text, r"LDG[.\w]*") == 1 and count(text, r"STG\.E\.128") == 1, loads
    assert count("\n".join(loop[loads[0]:]), r"HFMA2(\.MMA)?") >= 3 * 128
    one = kernel("half2_poly.cu", "poly_half2PK")  # the mangled name: not poly_half2_ilp
    assert (count(one, r"HFMA2\.MMA"), count(one, r"HFMA2(?!\.MMA)")) == (65, 64)


@needs_sass
def test_half2_persistent_blocks_fill_an_sm() -> None:
    usage = native.Library((CH08 / "half2_poly.cu",)).resource_usage("90")
    found = re.search(r"poly_half2_ilp.*\n.*REG:(\d+) STACK:(\d+)", usage)
    assert found and int(found.group(1)) <= 32 and found.group(2) == "0", usage


@needs_sass
def test_tail_effect_blocks_fit_two_per_sm(tmp_path: Path) -> None:
    usage = native.Library((CH08 / "tail_waves.cu",)).resource_usage("90")
    regs = [int(r) for r in re.findall(r"REG:(\d+)", usage)]
    assert len(regs) == 2 and max(regs) <= 32, usage


def longest_loop(body: str) -> list[str]:
    """The instructions (NOPs left out) of a kernel's longest loop: its longest backward branch's span."""
    code = [(int(at, 16), op.strip()) for at, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", body)
            if not op.lstrip().startswith("NOP")]
    spans = [(int(back.group(1), 16), at) for at, op in code
             if (back := re.search(r"\bBRA 0x([0-9a-f]+)", op)) and int(back.group(1), 16) < at]
    assert spans, "no loop"
    start, end = max(spans, key=lambda s: s[1] - s[0])
    return [o for a, o in code if start <= a <= end]


def hot_loop(body: str) -> list[str]:
    """The instructions (NOPs left out) of a kernel's first loop: its first backward branch's span."""
    code = [(int(at, 16), op.strip()) for at, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", body)
            if not op.lstrip().startswith("NOP")]
    for at, op in code:
        back = re.search(r"\bBRA 0x([0-9a-f]+)", op)
        if back and int(back.group(1), 16) < at:
            return [o for a, o in code if int(back.group(1), 16) <= a <= at]
    raise AssertionError("no loop")


def load_leads(loop: list[str]) -> list[int]:
    """For each LDG of a loop: the FFMAs issued before the first instruction that reads the register it
    loads, the loop read round its back edge (a load may feed the next iteration)."""
    leads = []
    for at, op in enumerate(loop):
        if not (load := re.match(r"(?:@!?P\d\s+)?LDG\S*\s+(R\d+),", op)):
            continue
        ffma = 0
        for later in loop[at + 1:] + loop[:at]:
            if re.search(rf"\b{load.group(1)}\b", later.partition(",")[2]):
                break
            ffma += "FFMA" in later
        leads.append(ffma)
    return leads


@needs_sass
def test_register_spill_loads_run_ahead_of_their_use() -> None:
    """fir_shift loads each row 8 outputs before it is needed (ptxas left alone keeps some 55 FFMAs ahead,
    none across the back edge), in 72 registers: 7 blocks of 128 threads an SM, still no spill."""
    leads = load_leads(hot_loop(kernel("fir_spill.cu", "fir_shift")))
    assert len(leads) == 32 and min(leads) >= 4 * 32, leads
    usage = native.Library((CH08 / "fir_spill.cu",)).resource_usage("90")
    shift = re.search(r"fir_shift.*\n.*REG:(\d+) STACK:(\d+)", usage)
    assert shift and int(shift.group(1)) <= 72 and shift.group(2) == "0", usage


@needs_sass
@pytest.mark.parametrize("name", ["tile_blocks", "persistent_blocks"])
def test_tail_effect_loop_is_four_chains_of_ffma(name: str) -> None:
    loop = hot_loop(kernel("tail_waves.cu", name))
    ffma = count("\n".join(loop), "FFMA")
    assert ffma == 4 * 128 and ffma >= 0.93 * len(loop), f"{ffma} FFMA of {len(loop)} instructions"


@needs_sass
def test_predication_blocks_fit_eight_per_sm() -> None:
    usage = native.Library((CH08 / "odd_branch.cu",)).resource_usage("90")
    regs = [int(r) for r in re.findall(r"REG:(\d+)", usage)]
    assert len(regs) == 2 and max(regs) <= 32, usage


@needs_sass
@pytest.mark.parametrize(("name", "sides"), [("odd_branchy", 2), ("odd_select", 1)])
def test_predication_loop_is_four_chains_with_the_next_loads_early(name: str, sides: int) -> None:
    loop = hot_loop(kernel("odd_branch.cu", name))
    ffma = count("\n".join(loop), "FFMA")
    assert ffma == 4 * 128 * sides and ffma >= 0.93 * len(loop), f"{ffma} FFMA of {len(loop)} instructions"
    loads = [k for k, op in enumerate(loop) if re.search(r"\bLDG\b", op)]
    assert len(loads) == 4, loads
    hidden = count("\n".join(loop[max(loads):]), "FFMA")  # sunk to the loop's end, they would hide behind none
    assert hidden >= 128, f"the next step's loads are followed by {hidden} FFMA of the step"
