"""ch11's CUDA C++ libraries, as its pairs declare them, build through aisp.kits.native for sm_90
(no GPU needed; skipped without nvcc) and export their entry points; the small kernel keeps its
FMA chain (the compiler did not fold the loop away), unrolled into runs of FFMAs, and its PDL instantiations
hold the grid-dependency wait and trigger. Every .cu's compile check is also in
test_kits_native."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH11 = Path(__file__).resolve().parents[1] / "ch11"
ENTRY_POINTS = {"ch11_kernels": ("small_kernel", "small_kernel_pdl", "small_kernel_unrolled", "legacy_run"), "stream_ordered": ("alloc_run", "pool_init"),
                "green_contexts": ("green_init", "green_fork", "green_join", "green_chain_ms")}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def libraries() -> dict[str, native.Library]:
    common = import_module_at(CH11 / "ch11_common.py")
    ordered = import_module_at(CH11 / "baseline_stream_ordered_allocator.py").LIBRARY
    return {lib.name: lib for lib in (common.KERNELS, common.GREEN, ordered)}


def test_every_cuda_source_is_a_declared_library() -> None:
    assert {lib.sources for lib in libraries().values()} == {(src,) for src in sorted(CH11.glob("*.cu"))}
    assert set(libraries()) == set(ENTRY_POINTS)


@needs_nvcc
@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_library_builds_for_sm90_and_exports_its_entry_points(name: str, fresh_native_cache: Path) -> None:
    path = libraries()[name].build("90")
    assert path.parent == fresh_native_cache and "-sm90-" in path.name
    lib = ctypes.CDLL(str(path))
    for entry in ENTRY_POINTS[name]:
        assert hasattr(lib, entry), f"{name} does not export {entry}"


@needs_nvcc
@pytest.mark.usefixtures("fresh_native_cache")
def test_fma_chain_is_a_loop_of_ffma() -> None:
    if native.cuobjdump() is None:
        pytest.skip("cuobjdump is not available")
    sass = libraries()["ch11_kernels"].sass("90")
    body = sass[sass.index("fma_chain"):]
    assert "FFMA" in body and "BRA" in body


def functions(sass: str) -> dict[str, list[str]]:
    """Each kernel's SASS instructions (opcode and operands, predicates kept), by mangled name."""
    found: dict[str, list[str]] = {}
    for block in sass.split("Function : ")[1:]:
        name, _, body = block.partition("\n")
        found[name.strip()] = re.findall(r"/\*[0-9a-f]{4}\*/\s+([^;]+);", body)
    return found


def fma_chains(sass: str) -> dict[tuple[int, bool], list[str]]:
    """fma_chain<kPdl, kUnrolled>'s instructions by (kPdl, kUnrolled), from the mangled names."""
    found = {}
    for name, ins in functions(sass).items():
        match = re.search(r"fma_chainILi(\d)ELb([01])E", name)
        if match:
            found[int(match.group(1)), match.group(2) == "1"] = ins
    return found


def longest_ffma_run(instructions: list[str]) -> int:
    """The most FFMAs in a row: a loop unrolled k times shows a run of about k."""
    best = run = 0
    for ins in instructions:
        run = run + 1 if ins.startswith("FFMA") else 0
        best = max(best, run)
    return best


def test_longest_ffma_run_counts_consecutive_ffmas() -> None:
    assert longest_ffma_run(["FFMA R1", "FFMA R1", "IADD3 R2", "FFMA R1", "FFMA R1", "FFMA R1", "BRA 0x10"]) == 3
    assert longest_ffma_run(["IADD3 R2"]) == 0


@needs_nvcc
@pytest.mark.usefixtures("fresh_native_cache")
def test_fma_chain_unrolls_and_pdl_kernels_wait_and_trigger() -> None:
    """fma_chain<0> (plain), <1> (PDL, load after the wait), <2> (PDL, load before it): every one runs
    its chain in runs of 8+ FFMAs (14 from nvcc 13.0's unrolling of the plain loop; the 64-a-trip loop
    measured ~10% slower on an H200 and was reverted); the PDL ones hold griddepcontrol.wait (ACQBULK) and launch_dependents
    (PREEXIT), the plain one neither, and only <2> loads before its wait."""
    if native.cuobjdump() is None:
        pytest.skip("cuobjdump is not available")
    by_mode = {mode: ins for (mode, unrolled), ins in fma_chains(libraries()["ch11_kernels"].sass("90")).items()
               if not unrolled}
    assert sorted(by_mode) == [0, 1, 2]
    for mode, ins in by_mode.items():
        assert longest_ffma_run(ins) >= 8, f"fma_chain<{mode}>: {longest_ffma_run(ins)} FFMAs in a row"
        has_wait, has_trigger = any(i.startswith("ACQBULK") for i in ins), any(i.startswith("PREEXIT") for i in ins)
        assert has_wait == has_trigger == (mode != 0)
    load = {mode: next(k for k, i in enumerate(ins) if i.startswith("LDG")) for mode, ins in by_mode.items()}
    wait = {mode: next(k for k, i in enumerate(by_mode[mode]) if i.startswith("ACQBULK")) for mode in (1, 2)}
    assert load[2] < wait[2] and wait[1] < load[1]


@needs_nvcc
@pytest.mark.usefixtures("fresh_native_cache")
def test_green_contexts_is_host_code_that_needs_no_libcuda() -> None:
    """green_contexts.cu launches nothing (no kernel in its SASS) and reaches the driver's green-context
    functions through cudaGetDriverEntryPointByVersion, so the library does not link libcuda."""
    if native.cuobjdump() is None:
        pytest.skip("cuobjdump is not available")
    lib = libraries()["green_contexts"]
    assert "Function : " not in lib.sass("90")
    assert "-lcuda" not in lib.flags
    source = lib.sources[0].read_text()
    for name in ("cuDevSmResourceSplitByCount", "cuGreenCtxCreate", "cuGreenCtxStreamCreate", "cuStreamWaitEvent"):
        assert f'"{name}"' in source, f"{name} is not looked up by name"


def stalls(sass: str) -> dict[str, list[tuple[int, int, str]]]:
    """Each kernel's instructions as (address, stall cycles, text), by mangled name. sm_90 SASS is two
    64-bit words an instruction (cuobjdump prints each in a comment); the stall count, the cycles the
    scheduler waits before the warp's next instruction, is bits 41-44 of the second word."""
    found: dict[str, list[tuple[int, int, str]]] = {}
    for block in sass.split("Function : ")[1:]:
        name, _, body = block.partition("\n")
        pairs = re.findall(r"/\*([0-9a-f]{4})\*/\s+([^;]+);\s*/\* 0x([0-9a-f]{16}) \*/\s*\n\s*/\* 0x([0-9a-f]{16}) \*/", body)
        found[name.strip()] = [(int(addr, 16), (int(high, 16) >> 41) & 0xF, text.strip())
                               for addr, text, _, high in pairs]
    return found


def main_loop_cycles_per_ffma(ins: list[tuple[int, int, str]]) -> tuple[int, float]:
    """The loop holding the most FFMAs (a backward branch and the instructions from its target to it):
    its FFMAs a trip and its static cycles (the stall counts' sum) per FFMA."""
    best = (0, 0.0)
    for addr, _, text in ins:
        jump = re.match(r"@!?P\d BRA 0x([0-9a-f]+)", text)
        if jump and int(jump.group(1), 16) < addr:
            body = [(s, t) for a, s, t in ins if int(jump.group(1), 16) <= a <= addr]
            ffmas = sum(t.startswith("FFMA") for _, t in body)
            if ffmas > best[0]:
                best = (ffmas, sum(s for s, _ in body) / ffmas)
    return best


def test_main_loop_cycles_per_ffma_reads_the_stall_counts() -> None:
    ins = [(0x10, 4, "FFMA R1, R1, R2, 1"), (0x20, 1, "FFMA R1, R1, R2, 1"), (0x30, 6, "@P0 BRA 0x10"),
           (0x40, 4, "FFMA R1, R1, R2, 1"), (0x50, 5, "@!P1 BRA 0x40")]
    assert main_loop_cycles_per_ffma(ins) == (2, 5.5)
    assert main_loop_cycles_per_ffma([(0x10, 4, "FFMA R1, R1, R2, 1")]) == (0, 0.0)


def ffma_sources(text: str) -> list[int]:
    """The register numbers an FFMA reads (RZ and immediates left out)."""
    return [int(r) for r in re.findall(r"\bR(\d+)\b", text.split(",", 1)[1])]


@needs_nvcc
@pytest.mark.usefixtures("fresh_native_cache")
def test_unrolled_fma_chain_runs_the_floors_loop() -> None:
    """fma_chain<0, true> and <1, true> (small_kernel_unrolled): a run of 64+ FFMAs; the main loop at
    most 4.05 static cycles an FMA (fma_dependent's 4.02), below the plain loop's (4.19); every FFMA of
    it reads two registers from different banks (odd and even: the reverted loop's FFMA R8, R8, R2, R3
    read two from one) and an immediate; the PDL one waits before its load, the plain one never."""
    if native.cuobjdump() is None:
        pytest.skip("cuobjdump is not available")
    sass = libraries()["ch11_kernels"].sass("90")
    chains = fma_chains(sass)
    timed = {key: next(ins for name, ins in stalls(sass).items() if re.search(rf"fma_chainILi{key[0]}ELb{int(key[1])}E", name))
             for key in chains}
    plain_ffmas, plain_cycles = main_loop_cycles_per_ffma(timed[0, False])
    assert plain_ffmas >= 8 and plain_cycles > 4.1
    for mode in (0, 1):
        ins = chains[mode, True]
        assert longest_ffma_run(ins) >= 64
        ffmas, cycles = main_loop_cycles_per_ffma(timed[mode, True])
        assert ffmas >= 64 and cycles <= 4.05 < plain_cycles, f"fma_chain<{mode}, true>: {cycles:.3f} cycles an FMA"
        loop = [text for _, _, text in timed[mode, True] if text.startswith("FFMA")]
        for text in loop:
            regs = ffma_sources(text)
            assert len(regs) == 2 and regs[0] % 2 != regs[1] % 2 and "e-05" in text, text
        has_wait = any(i.startswith("ACQBULK") for i in ins)
        assert has_wait == (mode == 1)
        if has_wait:
            assert next(k for k, i in enumerate(ins) if i.startswith("ACQBULK")) < next(
                k for k, i in enumerate(ins) if i.startswith("LDG"))
