"""ch12's CUDA C++ libraries, as its pairs declare them, build through aisp.kits.native for sm_90
(no GPU needed; skipped without nvcc) and export their entry points; the SASS holds what each pair
is about: the device-side launch (CDP2) for dynamic parallelism, the device-side cudaGraphLaunch for
device_graph_launch, the atomic queue for work_queue.
(Every .cu's plain sm_90 compile check is also in test_kits_native.)"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH12 = Path(__file__).resolve().parents[1] / "ch12"
BASELINES = ("baseline_graph_replay", "baseline_graph_update", "baseline_conditional_while",
             "baseline_conditional_if", "baseline_dynamic_parallelism", "baseline_work_queue",
             "baseline_device_graph_launch")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_cuobjdump = pytest.mark.skipif(native.cuobjdump() is None, reason="cuobjdump is not available")


def declared(module: str) -> tuple[native.Library, dict]:
    mod = import_module_at(CH12 / f"{module}.py")
    return mod.LIBRARY, mod.SIGNATURES


def test_every_cuda_source_is_a_declared_library() -> None:
    assert {declared(m)[0].sources for m in BASELINES} == {(src,) for src in sorted(CH12.glob("*.cu"))}


@pytest.mark.parametrize("module", ["baseline_dynamic_parallelism", "baseline_device_graph_launch"])
def test_device_launches_build_relocatable_device_code(module: str) -> None:
    assert {"-rdc=true", "-lcudadevrt"} <= set(declared(module)[0].flags)


@needs_nvcc
@pytest.mark.parametrize("module", BASELINES)
def test_library_builds_for_sm90_and_exports_its_entry_points(module: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    lib, signatures = declared(module)
    path = lib.build("90")
    assert path.parent == tmp_path and "-sm90-" in path.name
    handle = ctypes.CDLL(str(path))
    assert all(hasattr(handle, name) for name in signatures)


def kernels(sass: str) -> dict[str, str]:
    """Each function's SASS, by (mangled) name."""
    parts = re.split(r"\n\s*Function : (\S+)", sass)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@needs_nvcc
@needs_cuobjdump
def test_level_kernel_launches_from_the_device() -> None:
    funcs = kernels(declared("baseline_dynamic_parallelism")[0].sass("90"))
    assert any("CDP2LaunchDevice" in name for name in funcs)
    level = next(body for name, body in funcs.items() if "dp_level" in name)
    assert "CALL" in level


@needs_nvcc
@needs_cuobjdump
def test_lean_level_launches_from_the_device_with_no_transcendentals_and_fits_five_blocks() -> None:
    """dp_lean_level calls the device runtime (its launching block), reads the {p, w} table (one 16-byte
    load) instead of computing tanh and exp10 (no MUFU.EX2), and fits 5 blocks of 256 threads an SM
    (at most 48 registers): what sizes a level's resident grid."""
    lib = declared("baseline_dynamic_parallelism")[0]
    funcs = kernels(lib.sass("90"))
    lean = next(body for name, body in funcs.items() if "dp_lean_level" in name)
    old = next(body for name, body in funcs.items() if "dp_level" in name)
    assert "CALL" in lean and "LDG.E.128.CONSTANT" in lean and "ATOMG.E.ADD.STRONG.GPU" in lean
    assert "MUFU.EX2" not in lean and "MUFU.EX2" in old
    usage = lib.resource_usage("90")
    regs = re.search(r"dp_lean_level\S*:\s*\n\s*REG:(\d+)", usage)
    assert regs and int(regs.group(1)) <= 48
    lean_signatures = import_module_at(CH12 / "optimized_dynamic_parallelism_lean.py").SIGNATURES
    handle = ctypes.CDLL(str(lib.build("90")))
    assert all(hasattr(handle, name) for name in lean_signatures)


@needs_nvcc
@needs_cuobjdump
def test_queue_kernel_takes_rows_with_a_global_atomic() -> None:
    funcs = kernels(declared("baseline_work_queue")[0].sass("90"))
    dynamic = next(body for name, body in funcs.items() if "wq_dynamic_kernel" in name)
    static = next(body for name, body in funcs.items() if "wq_static_kernel" in name)
    assert "ATOMG" in dynamic and "ATOMG" not in static
    assert "LDG.E.128" in dynamic and "LDG.E.128" in static


@needs_nvcc
@needs_cuobjdump
def test_scheduler_gate_launches_graphs_from_the_device() -> None:
    """gate<true> (the scheduler's node) calls the device runtime; gate<false> (the host loop's) calls
    nothing; the device code links against device-side cudaGraphLaunch."""
    lib = declared("baseline_device_graph_launch")[0]
    funcs = kernels(lib.sass("90"))
    device = next(body for name, body in funcs.items() if name.startswith("_Z4gateILb1E"))
    host = next(body for name, body in funcs.items() if name.startswith("_Z4gateILb0E"))
    assert "CALL" in device and "CALL" not in host
    elf = subprocess.run([native.cuobjdump(), "-elf", str(lib.build("90"))], capture_output=True, text=True,
                         check=True).stdout
    assert "cudaGraphLaunch" in elf and "cudaGetCurrentGraphExec" in elf


@needs_nvcc
@needs_cuobjdump
def test_cos_step_sets_the_flag_once_a_block() -> None:
    """cos_step ORs "still moving" over its block (a barrier reduction, BAR.RED.OR) and then stores the
    flag once: one store instruction for x and one for the flag, not a predicated flag store a warp."""
    funcs = kernels(declared("baseline_conditional_while")[0].sass("90"))
    step = next(body for name, body in funcs.items() if "cos_step" in name)
    assert "BAR.RED.OR" in step
    copy = next(body for name, body in funcs.items() if "copy_and_reset" in name)
    assert "LDG" in copy and "STG" in copy


@needs_nvcc
@needs_cuobjdump
def test_pdl_steps_wait_before_they_load() -> None:
    """affine_step_pdl<true> triggers its successor (PREEXIT) before its wait (ACQBULK), <false> after;
    both load (from L2) only after the wait; the plain affine_step holds neither instruction."""
    funcs = kernels(declared("baseline_graph_replay")[0].sass("90"))
    plain = next(body for name, body in funcs.items() if name.startswith("_Z11affine_step"))
    assert "ACQBULK" not in plain and "PREEXIT" not in plain
    for flag, trigger_first in (("ILb1E", True), ("ILb0E", False)):
        body = next(body for name, body in funcs.items() if "affine_step_pdl" in name and flag in name)
        wait, trigger, load = (body.index(op) for op in ("ACQBULK", "PREEXIT", "LDG"))
        assert (trigger < wait) == trigger_first and wait < load


@needs_nvcc
@needs_cuobjdump
def test_indirect_pdl_step_loads_its_scalar_before_the_wait_and_its_input_after() -> None:
    """affine_step_ref_pdl (graph_update's by-reference PDL chain) loads c_t, which no node writes, before
    its wait (ACQBULK) and its element, the previous kernel's output, after it; it triggers its successor
    (PREEXIT) first. affine_step_ref, the plain one, holds neither instruction."""
    funcs = kernels(declared("baseline_graph_update")[0].sass("90"))
    plain = next(body for name, body in funcs.items() if name.startswith("_Z15affine_step_ref") and "pdl" not in name)
    assert "ACQBULK" not in plain and "PREEXIT" not in plain
    body = next(body for name, body in funcs.items() if "affine_step_ref_pdl" in name)
    loads = [m.start() for m in re.finditer(r"\bLDG", body)]
    assert len(loads) == 2, loads
    assert body.index("PREEXIT") < body.index("ACQBULK")
    assert loads[0] < body.index("ACQBULK") < loads[1]
