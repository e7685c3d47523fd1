"""Chapter 6's kernels at the instruction level, without a GPU (nvcc + cuobjdump, sm_90):
__launch_bounds__ halves the registers, the figures occupancy.py records are the compiler's,
the split Horner evaluation keeps 8 independent FMAs in flight where the chain keeps one, and
the column reads of the unpadded K tile are the 128-bit loads the README describes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH06 = Path(__file__).resolve().parents[1] / "ch06"
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump")
RESOURCE = re.compile(r"Function (\S+):\s+REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
FFMA = re.compile(r"\bFFMA (R\d+), ([^;]*);")


def resources(source: str) -> dict[str, tuple[int, int, int]]:
    """(registers, stack bytes, shared bytes) per mangled kernel name, from ``cuobjdump -res-usage``."""
    out = native.Library((CH06 / source,)).resource_usage("90")
    return {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in RESOURCE.finditer(out)}


def kernel(table: dict, name: str) -> tuple[int, int, int]:
    """The entry of the kernel ``name`` (mangled ``_Z<len><name>...``: dequantize is not dequantize4)."""
    [found] = [v for k, v in table.items() if f"{len(name)}{name}" in k]
    return found


def function(fns: dict[str, str], name: str) -> str:
    [found] = [v for k, v in fns.items() if f"{len(name)}{name}" in k]
    return found


def functions(source: str) -> dict[str, str]:
    """SASS text per mangled kernel name."""
    sass = native.Library((CH06 / source,)).sass("90")
    return {part.split()[0]: part for part in sass.split("Function : ")[1:]}


def test_launch_bounds_caps_registers_for_eight_blocks_of_256() -> None:
    res = resources("launch_bounds.cu")
    free, bounded = kernel(res, "horner_free")[0], kernel(res, "horner_bounded")[0]
    assert free > 32 >= bounded, (free, bounded)
    occupancy = import_module_at(CH06 / "occupancy.py")
    limits = occupancy.SmLimits()
    assert occupancy.blocks_per_sm(occupancy.Kernel("f", free, 0), 256, limits)[0] < 8
    assert occupancy.blocks_per_sm(occupancy.Kernel("b", bounded, 0), 256, limits) == (8, "threads")


def test_bounded_horner_spills_and_the_fitted_one_does_not() -> None:
    """optimized_launch_bounds_fitted's kernel: the same __launch_bounds__(256, 8) as horner_bounded,
    which spills (a stack frame, LDL/STL in its loop); horner_fitted fits 32 registers with none:
    the coefficients come from shared memory, 12 LDS.128 per 4 elements (a loop and the n % 4 tail),
    each element 16-byte loads and stores."""
    res = resources("launch_bounds.cu")
    assert kernel(res, "horner_bounded")[1] > 0
    regs, stack, shared = kernel(res, "horner_fitted")
    assert regs <= 32 and stack == 0 and shared >= 192, (regs, stack, shared)
    sass = function(functions("launch_bounds.cu"), "horner_fitted")
    assert not re.search(r"\b(LDL|STL)\b", sass)
    assert len(re.findall(r"\bLDS\.128\b", sass)) == 24 and not re.search(r"\bLDS\b(?!\.128)", sass)
    loads, stores = memory_ops(sass)
    assert "LDG.E.128.CONSTANT" in loads and "STG.E.128" in stores, (loads, stores)
    assert len(re.findall(r"\bFFMA\b", sass)) == 4 * 47 + 47  # the float4 loop; the tail keeps one lane


def pipeline_code(sass: str) -> str:
    """One letter per LDG.128 (L), LDS.128 (s), FFMA (f) and STG.128 (S) of a kernel, in SASS order."""
    ops = re.findall(r"\b(LDG\.E\.128\S*|LDS\.128|FFMA|STG\.E\.128)\b", sass)
    return "".join({"LDS.128": "s", "FFMA": "f", "STG.E.128": "S"}.get(op, "L") for op in ops)


PIPELINED = re.compile(r"L(L[sf]{200}S)(L[sf]{200}S)([sf]{59})")
"""The pipelined loop: a first load, then (unrolled by 2) the next group's load, this group's 12 LDS.128
and 188 FFMAs, its store; then the n % 4 tail (12 LDS.128, 47 FFMAs, scalar load and store)."""


def test_pipeline_code_finds_a_load_sunk_into_the_fma_block() -> None:
    step = "L" + "s" + "f" * 12 + ("s" + "f" * 16) * 11 + "S"  # 12 LDS.128, 188 FFMAs
    tail = "s" + "f" * 3 + ("s" + "f" * 4) * 11
    assert PIPELINED.fullmatch("L" + step + step + tail)
    sunk = "s" + "f" * 12 + ("s" + "f" * 16) * 6 + "L" + ("s" + "f" * 16) * 5 + "S"
    assert not PIPELINED.fullmatch("L" + sunk + step + tail)
    assert pipeline_code("LDG.E.128.STRONG.SYS R8, [R8.64] ;\nLDS.128 R4, [R0] ;\nFFMA R1, R2, R3, R4 ;\n"
                         "STG.E.128 [R26.64], R4 ;\nSTG.E [R2.64], R19 ;") == "LsfS"


def test_pipelined_horner_loads_the_next_group_before_the_fmas() -> None:
    """optimized_launch_bounds_pipelined's kernel: horner_fitted's working set at the same bound (32
    registers, no spill), and in SASS each group's FMA block starts after the LDG.128 of the next group
    (ld.volatile: LDG.E.128.STRONG.SYS), so that load is in flight while the warp computes."""
    regs, stack, shared = kernel(resources("launch_bounds.cu"), "horner_pipelined")
    assert regs <= 32 and stack == 0 and shared >= 192, (regs, stack, shared)
    sass = function(functions("launch_bounds.cu"), "horner_pipelined")
    assert not re.search(r"\b(LDL|STL)\b", sass) and not re.search(r"\bLDS\b(?!\.128)", sass)
    match = PIPELINED.fullmatch(pipeline_code(sass))
    assert match, pipeline_code(sass)
    assert [group.count("s") for group in match.groups()] == [12, 12, 12]
    assert [group.count("f") for group in match.groups()] == [188, 188, 47]
    loads, stores = memory_ops(sass)
    assert loads.count("LDG.E.128.STRONG.SYS") == 2 and stores.count("STG.E.128") == 2, (loads, stores)


def async_code(sass: str) -> str:
    """pipeline_code's letters, plus G for an LDGSTS (cp.async), c for its commit and W for a wait."""
    ops = re.findall(r"\b(LDGSTS\S*|LDGDEPBAR|DEPBAR\S*|LDG\.E\S*|LDS\.128|FFMA|STG\.E\S*)\b", sass)
    letter = {"LDS.128": "s", "FFMA": "f", "LDGDEPBAR": "c"}
    return "".join(letter.get(op) or {"LDGS": "G", "DEPB": "W", "STG.": "S"}.get(op[:4], "L") for op in ops)


ASYNC_LOOP = re.compile(r"GGcWss(s[f]{24}(?:s[f]{32}){11})SS")
"""horner_async's loop: the two cp.async of the tile two steps ahead, their commit, the wait for this
tile, its two LDS.128 of x, 12 coefficient LDS.128 each ahead of 32 FFMAs (8 elements; 24 the first),
the two STG.128."""


def test_async_code_finds_the_loop() -> None:
    loop = "GGcWss" + "s" + "f" * 24 + ("s" + "f" * 32) * 11 + "SS"
    assert ASYNC_LOOP.search("GLGcGGc" + loop + "cW")
    assert not ASYNC_LOOP.search("GGcss" + loop[5:])  # no wait before reading the tile back
    assert async_code("LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;\nLDGDEPBAR ;\nDEPBAR.LE SB0, 0x2 ;\n"
                      "LDS.128 R4, [R0] ;\nFFMA R1, R2, R3, R4 ;\nSTG.E.128 [R2.64], R4 ;") == "GcWsfS"


def test_async_horner_stages_x_through_shared_memory_without_spill() -> None:
    """optimized_launch_bounds_async's kernel: the same bound (32 registers, no spill), 24 KiB of x
    stages plus the coefficients in shared memory, and in SASS the loop copies the tile two steps ahead
    with cp.async (LDGSTS.E.BYPASS.128, no register held) before it waits for this one; 8 elements a
    step, so 376 FFMAs for 12 coefficient LDS.128."""
    regs, stack, shared = kernel(resources("launch_bounds.cu"), "horner_async")
    assert regs <= 32 and stack == 0 and shared >= 3 * 512 * 16 + 192, (regs, stack, shared)
    sass = function(functions("launch_bounds.cu"), "horner_async")
    sass = re.sub(r"@!PT LDS RZ, \[RZ\]", "", sass)  # never-executed padding ptxas puts after LDGSTS
    assert not re.search(r"\b(LDL|STL)\b", sass) and not re.search(r"\bLDS\b(?!\.128)", sass)
    assert ASYNC_LOOP.search(async_code(sass)), async_code(sass)
    assert re.findall(r"\bLDGSTS\S*", sass) == ["LDGSTS.E.BYPASS.128"] * 6  # 2 stages ahead, then 1 a step
    assert len(re.findall(r"\bFFMA\b", sass)) == 8 * 47 + 4 * 47 + 47  # the loop, the partial tile, n % 4
    occupancy = import_module_at(CH06 / "occupancy.py")
    assert occupancy.blocks_per_sm(occupancy.Kernel("a", regs, shared - 1024), 256, occupancy.SmLimits())[0] == 8


def test_swizzled_scores_read_16_bytes_a_time_without_spill() -> None:
    """optimized_bank_conflicts_swizzled's kernel: shared memory only through 16-byte accesses
    (8 LDS.128 in its loop over d, 8 STS.128 staging the tiles), float4 global loads and stores,
    64 FFMAs per loop step, 48 registers, no spill: 10 blocks of 128 per SM."""
    sass = function(functions("bank_conflicts.cu"), "scores_swizzled")
    assert len(re.findall(r"\bLDS\.128\b", sass)) == 8 and not re.search(r"\bLDS\b(?!\.128)", sass)
    assert len(re.findall(r"\bSTS\.128\b", sass)) == 8 and not re.search(r"\bSTS\b(?!\.128)", sass)
    loads, stores = memory_ops(sass)
    assert loads == ["LDG.E.128.CONSTANT"] * 8 and stores == ["STG.E.128"] * 4, (loads, stores)
    assert len(re.findall(r"\bFFMA\b", sass)) == 64 and not re.search(r"\b(LDL|STL)\b", sass)
    regs, stack, shared = kernel(resources("bank_conflicts.cu"), "scores_swizzled")
    assert regs <= 48 and stack == 0, (regs, stack)
    occupancy = import_module_at(CH06 / "occupancy.py")
    assert occupancy.blocks_per_sm(occupancy.Kernel("s", regs, shared - 1024), 128, occupancy.SmLimits())[0] == 10


def test_recorded_figures_are_the_compilers() -> None:
    occupancy = import_module_at(CH06 / "occupancy.py")
    res = {**resources("vector_add.cu"), **resources("occupancy_api.cu"), **resources("launch_bounds.cu"),
           **resources("vectorized_ops.cu"), **resources("bank_conflicts.cu")}
    for k in occupancy.RECORDED:
        regs, stack, shared = kernel(res, k.name)
        assert (regs, stack) == (k.registers, k.local), k.name
        assert k.shared <= shared <= k.shared + 1024, k.name  # the ELF may count the reserved 1 KiB


def max_independent_ffma(sass: str) -> int:
    """Longest run of consecutive FFMAs in which none reads a register an earlier one of the run
    wrote: how many FMAs a warp can issue back to back without waiting on one of them."""
    ops = [(m[1], set(re.findall(r"\bR\d+\b", m[2]))) for m in FFMA.finditer(sass)]
    best = 0
    for i in range(len(ops)):
        run, written = 0, set()
        for dest, reads in ops[i:]:
            if reads & written:
                break
            run, written = run + 1, written | {dest}
        best = max(best, run)
    return best


def test_independent_ffma_runs_follow_the_registers() -> None:
    chain = "FFMA R8, R4, R8, R7 ;\nFFMA R25, R4.reuse, R8, R9 ;\nFFMA R2, R4, R25, R7 ;"
    split = "FFMA R8, R4, R8, R7 ;\nFFMA R9, R4, R9, R7 ;\nFFMA R10, R4, R10, R7 ;\nFFMA R8, R4, R8, R7 ;"
    assert (max_independent_ffma(chain), max_independent_ffma(split)) == (1, 3)


def test_split_horner_keeps_eight_fmas_in_flight() -> None:
    fns = functions("ilp_accumulators.cu")
    chain = next(v for k, v in fns.items() if "horner_chain" in k)
    split = next(v for k, v in fns.items() if "horner_split" in k)
    assert max_independent_ffma(chain) == 1
    assert max_independent_ffma(split) == 8


def test_unpadded_column_reads_are_vector_loads_padded_are_scalar() -> None:
    fns = functions("bank_conflicts.cu")
    unpadded = next(v for k, v in fns.items() if "scoresILi0E" in k)
    padded = next(v for k, v in fns.items() if "scoresILi1E" in k)
    # 32 K-column words per thread: 8 x LDS.128 (4 steps each) unpadded, 32 x LDS padded (stride 33
    # words cannot be 16-byte aligned); plus 32 broadcast LDS.128 of Q rows in both.
    assert len(re.findall(r"\bLDS\.128\b", unpadded)) == 40
    assert len(re.findall(r"\bLDS\.128\b", padded)) == 32
    assert len(re.findall(r"\bLDS R", padded)) == 32


def memory_ops(sass: str) -> tuple[list[str], list[str]]:
    """The global load and store opcodes (with their width suffixes) of one kernel's SASS."""
    return re.findall(r"\bLDG\.\S+", sass), re.findall(r"\bSTG\.\S+", sass)


def test_vector_add_grids_move_float4s_and_per_element_stays_scalar() -> None:
    fns = functions("vector_add.cu")
    for name in ("add_one_block", "add_grid_stride"):
        loads, stores = memory_ops(next(v for k, v in fns.items() if name in k))
        assert loads and all(".128" in op for op in loads), (name, loads)
        assert stores and all(".128" in op for op in stores), (name, stores)
    loads, _ = memory_ops(next(v for k, v in fns.items() if "add_per_element" in k))
    assert loads and not any(".128" in op for op in loads), loads
    regs, stack, _ = kernel(resources("vector_add.cu"), "add_grid_stride")
    assert regs <= 32 and stack == 0, (regs, stack)  # 8 blocks of 256 per SM, no spill


def test_add_blocked4_issues_four_float4_loads_before_its_first_store() -> None:
    """optimized_block_size_float4's kernel: 4 LDG.E.128 (2 float4s of a and of b) before the first
    STG.E.128, every global access 128-bit, the add as FADD (bitwise the scalar kernel's), and at most
    32 registers without spill: 8 blocks of 256 per SM, the lesson's occupancy."""
    sass = function(functions("vector_add.cu"), "add_blocked4")
    loads, stores = memory_ops(sass)
    assert loads == ["LDG.E.128.CONSTANT"] * 4 and stores == ["STG.E.128"] * 2, (loads, stores)
    assert loads_before_first_store(sass, "LDG.E.128") == 4
    assert len(re.findall(r"\bFADD\b", sass)) == 8 and not re.search(r"\b(FFMA|LDL|STL)\b", sass)
    regs, stack, _ = kernel(resources("vector_add.cu"), "add_blocked4")
    assert regs <= 32 and stack == 0, (regs, stack)
    occupancy = import_module_at(CH06 / "occupancy.py")
    assert occupancy.blocks_per_sm(occupancy.Kernel("b", regs, 0), 256, occupancy.SmLimits()) == (8, "threads")


def test_dequantize_reads_one_code_and_writes_one_float_per_element() -> None:
    """The scalar kernel is kept: the 128-bit-load version measured slower (1.39x vs 2.16x on the H200)."""
    loads, stores = memory_ops(function(functions("occupancy_api.cu"), "dequantize"))
    assert any("U16" in op for op in loads) and not any(".128" in op for op in loads), loads
    assert stores and not any(".128" in op for op in stores), stores
    regs, stack, _ = kernel(resources("occupancy_api.cu"), "dequantize")
    assert regs <= 32 and stack == 0, (regs, stack)  # 2 blocks of 1,024 per SM, no spill


def loads_before_first_store(sass: str, load: str) -> int:
    """Most ``load`` instructions in a row, in program order, before the next global store: how
    many of them a thread has in flight at once (the unrolled loop's)."""
    best = run = 0
    for op in re.findall(r"\b(?:LDG|STG)\.\S+", sass):
        if op.startswith("STG"):
            best, run = max(best, run), 0
        elif op.startswith(load):
            run += 1
    return max(best, run)


def test_loads_before_first_store_counts_runs() -> None:
    text = "LDG.E.64 R8 ;\nLDG.E.64 R10 ;\nSTG.E.128 [R2] ;\nLDG.E.64 R4 ;\nSTG.E.128 [R2] ;"
    assert loads_before_first_store(text, "LDG.E.64") == 2


def test_dequantize4_reads_8_byte_codes_writes_float4s_and_keeps_4_loads_in_flight() -> None:
    """optimized_occupancy_api_ilp's kernel: LDG.E.64 codes, LDG only for the codebook copy
    otherwise; STG.E.128 only; 4 code loads issued before the first store; 32 registers, no spill."""
    sass = function(functions("occupancy_api.cu"), "dequantize4")
    loads, stores = memory_ops(sass)
    codes = [op for op in loads if ".64" in op]
    assert codes and all(".64" in op or op.startswith("LDG.E.CONSTANT") for op in loads), loads
    assert stores and all(".128" in op for op in stores), stores
    assert loads_before_first_store(sass, "LDG.E.64") >= 4
    regs, stack, shared = kernel(resources("occupancy_api.cu"), "dequantize4")
    assert regs <= 32 and stack == 0 and shared >= 32768, (regs, stack, shared)  # the API's 1,024 x 2 per SM


def test_affine_rows_moves_float4s_two_rows_in_flight() -> None:
    """optimized_vectorized_ops_native's kernel: every global access 128-bit (x, scale, bias, out),
    2 row loads before the first store, 32 registers without spill (8 blocks of 256 per SM)."""
    sass = function(functions("vectorized_ops.cu"), "affine_rows")
    loads, stores = memory_ops(sass)
    assert loads and all(op.startswith("LDG.E.128") for op in loads), loads
    assert stores and all(op.startswith("STG.E.128") for op in stores), stores
    assert loads_before_first_store(sass, "LDG.E.128") >= 2
    assert len(re.findall(r"\bFFMA\b", sass)) >= 8 and not re.search(r"\bFMUL\b|\bFADD\b", sass)
    regs, stack, _ = kernel(resources("vectorized_ops.cu"), "affine_rows")
    assert regs <= 32 and stack == 0, (regs, stack)
