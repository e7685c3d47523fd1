"""Chapter 7's CUDA C++ without a GPU: every .cu is a pair's library and builds for sm_90 (sm_90a for
TMA), and the SASS holds the instruction each optimized kernel is about while its baseline kernel
does not: LDGSTS (cp.async), UTMALDG (TMA), 128-bit global loads (SoA, peeled copy), 128-bit shared
loads, and for the register-blocked matmuls many FMAs per shared-memory load and no spills; the
cp.async-fed one copies without staging registers (LDGSTS, no LDG/STS in its loop) and syncs once a
slice where regblock syncs twice; the paired-lane one runs that loop instruction for instruction, and
its thread layout (read from the library) halves the wavefronts of B's 128-bit shared loads."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH07 = Path(__file__).resolve().parents[1] / "ch07"
SOURCES = sorted(CH07.glob("*.cu"))
LIBRARY_OF = {"aos_soa.cu": "baseline_aos_to_soa", "misaligned_copy.cu": "baseline_misaligned_access",
              "transpose.cu": "baseline_transpose", "tiled_matmul.cu": "baseline_tiled_matmul",
              "l2_persistence.cu": "baseline_l2_persistence", "async_copy.cu": "baseline_async_copy",
              "tma_tile_copy.cu": "baseline_tma_tile_copy", "views_cluster.cu": "optimized_noncontiguous_views_cluster"}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump (CUDA toolkit or the 'sass' extra)")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.getbasetemp() / "ch07-native"))


def library(source: str) -> native.Library:
    return import_module_at(CH07 / f"{LIBRARY_OF[source]}.py").LIBRARY


def kernels(sass: str) -> dict[str, str]:
    """SASS per kernel, keyed by the mangled name (``Function : _Z...``)."""
    parts = re.split(r"^\s*Function : (\S+)\s*$", sass, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def kernel(sass: str, name: str) -> str:
    found = [body for mangled, body in kernels(sass).items() if name in mangled]
    assert len(found) == 1, f"{name}: {len(found)} kernels in {sorted(kernels(sass))}"
    return found[0]


def test_every_source_is_a_pair_library() -> None:
    assert {p.name for p in SOURCES} == set(LIBRARY_OF)
    for src in SOURCES:
        assert library(src.name).sources == (src,)
    assert all((CH07 / f"{module}.py").is_file() for module in LIBRARY_OF.values())


@needs_nvcc
@pytest.mark.parametrize("source", sorted(LIBRARY_OF))
def test_library_builds_for_sm90(source: str) -> None:
    lib = library(source)
    path = lib.build("90")
    assert ("-sm90a-" if source == "tma_tile_copy.cu" else "-sm90-") in path.name


@needs_sass
@pytest.mark.parametrize(("source", "optimized", "baseline", "instruction"), [
    ("async_copy.cu", "cumsum_pipelined", "cumsum_sync", r"\bLDGSTS\b"),
    ("tma_tile_copy.cu", "stencil_tma", "stencil_threads", r"\bUTMALDG\b"),
    ("aos_soa.cu", "advance_soa", "advance_aos", r"\bLDG\.E\.128\b"),
    ("misaligned_copy.cu", "copy_peeled", "copy_scalar", r"\bLDG\.E\.128\b"),
    ("l2_persistence.cu", "gather_add_hints", "10gather_addP", r"\bSTG\.E\.NA\.128\b"),  # gather_add's mangled name
])
def test_optimized_kernel_holds_its_instruction(source: str, optimized: str, baseline: str, instruction: str) -> None:
    sass = library(source).sass("90")
    assert re.search(instruction, kernel(sass, optimized)), f"{optimized} lacks {instruction}"
    assert not re.search(instruction, kernel(sass, baseline)), f"{baseline} already has {instruction}"


def global_accesses(body: str) -> list[tuple[str, str]]:
    """(opcode with its modifiers, memory descriptor register) of each global load and store."""
    return re.findall(r"\b((?:LDG|STG)\.\S+)\s+(?:R\d+,\s*)?desc\[(UR\d+)\]", body)


@needs_sass
def test_hinted_gather_streams_x_and_out_under_their_own_cache_policy() -> None:
    """gather_add_hints: the x load and the out store skip L1 (.NA) and carry the evict_first policy
    in a memory descriptor of their own (createpolicy folded into a uniform register); idx and the
    table row load under the default descriptor, as all four accesses of gather_add do."""
    sass = library("l2_persistence.cu").sass("90")
    hinted, plain = global_accesses(kernel(sass, "gather_add_hints")), global_accesses(kernel(sass, "10gather_addP"))
    streamed = {desc for op, desc in hinted if ".NA." in op}
    normal = {desc for op, desc in hinted if ".NA." not in op}
    assert sorted(op.split(".")[0] for op, _ in hinted) == ["LDG", "LDG", "LDG", "STG"], hinted
    assert sum(".NA." in op for op, _ in hinted) == 2 and len(streamed) == len(normal) == 1, hinted
    assert streamed.isdisjoint(normal), hinted
    assert len(plain) == 4 and not any(".NA." in op for op, _ in plain) and len({d for _, d in plain}) == 1, plain


def fma_per_shared_load(body: str) -> float:
    return len(re.findall(r"\bFFMA\b", body)) / len(re.findall(r"\bLDS(\.\d+)?\b", body))


@needs_sass
def test_register_blocking_raises_fmas_per_shared_load() -> None:
    sass = library("tiled_matmul.cu").sass("90")
    regblock, smem = kernel(sass, "matmul_regblock"), kernel(sass, "matmul_smem")
    assert fma_per_shared_load(regblock) >= 12 > 4 >= fma_per_shared_load(smem)
    assert not re.search(r"\b(LDL|STL)\b", regblock), "matmul_regblock spills to local memory"



def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


@needs_sass
def test_async_matmul_copies_without_staging_and_syncs_once_a_slice() -> None:
    sass = library("tiled_matmul.cu").sass("90")
    body, reg = kernel(sass, ASYNC), kernel(sass, "matmul_regblock")
    assert count(r"\bLDGSTS\b", body) == 10  # 4 x 4 bytes of A + 16 of B, before the loop and in it
    assert not re.search(r"\b(LDG|STS)\b", body), "matmul_async stages a slice through registers"
    assert count(r"\bBAR\.SYNC\b", body) == 1 and count(r"\bBAR\.SYNC\b", reg) == 2
    assert count(r"\bFFMA\b", body) == 512 and fma_per_shared_load(body) >= 12
    assert not re.search(r"\b(LDL|STL)\b", body), "matmul_async spills to local memory"
    assert registers(ASYNC) <= 128, f"{registers(ASYNC)} registers: fewer than two 256-thread blocks an SM"


ASYNC, PAIRED = "matmul_asyncILb0E", "matmul_asyncILb1E"  # matmul_async<false>, <true>


def registers(name: str) -> int:
    usage = library("tiled_matmul.cu").resource_usage("90")
    return int(re.search(rf"{name}\w*:\s+REG:(\d+)", usage).group(1))


def opcodes(body: str) -> list[str]:
    """The opcodes of the kernel's main loop: from the target of its last backward branch to the branch."""
    lines = re.findall(r"/\*([0-9a-f]{4})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*);", body)
    start, end = max((int(m.group(1), 16), int(addr, 16)) for addr, op, rest in lines if op == "BRA"
                     for m in [re.search(r"0x([0-9a-f]+)", rest)] if m and int(m.group(1), 16) < int(addr, 16))
    return [op for addr, op, _ in lines if start <= int(addr, 16) <= end]


@needs_sass
def test_paired_matmul_runs_the_async_loop_instruction_for_instruction() -> None:
    sass = library("tiled_matmul.cu").sass("90")
    paired, loop = kernel(sass, PAIRED), opcodes(kernel(sass, ASYNC))
    assert opcodes(paired) == loop and loop.count("FFMA") == 512 and loop.count("LDS.128") == 32
    assert count(r"\bLDGSTS\b", paired) == 10 and count(r"\bBAR\.SYNC\b", paired) == 1
    assert not re.search(r"\b(LDL|STL)\b", paired), "matmul_async<true> spills to local memory"
    assert registers(PAIRED) <= 128, f"{registers(PAIRED)} registers: fewer than two 256-thread blocks an SM"


def wavefronts(addresses: list[int]) -> int:
    """Shared-memory wavefronts of one warp's 128-bit load (byte addresses by lane), by NVIDIA's rule:
    4 (one a quarter warp), 2 where lanes n, n^1 or lanes n, n^2 all share an address. The count holds
    without bank conflicts: the distinct 16-byte words are consecutive, at most 8 (128 bytes) a wavefront."""
    paired = any(all(addresses[n] == addresses[n ^ x] for n in range(32)) for x in (1, 2))
    words = sorted({a // 16 for a in addresses})
    assert words[-1] - words[0] + 1 == len(words) <= (16 if paired else 32), words
    return 2 if paired else 4


def load_wavefronts_per_k(cells: list[int]) -> int:
    """A warp's shared wavefronts for one k of the 8x8 block (A at 4 tr, 4 tr + 64; B at 4 tc, 4 tc + 64),
    summed over the 8 warps: the async kernel's fragment loads, rows of 132 floats (bank offset 0 here)."""
    total = 0
    for w in range(8):
        tr = [cells[32 * w + n] // 16 for n in range(32)]
        tc = [cells[32 * w + n] % 16 for n in range(32)]
        for part in (0, 64):
            total += wavefronts([4 * (4 * r + part) for r in tr]) + wavefronts([4 * (4 * c + part) for c in tc])
    return total


@needs_nvcc
def test_paired_lanes_cover_the_grid_and_halve_b_wavefronts() -> None:
    handle = ctypes.CDLL(str(library("tiled_matmul.cu").build("90")))
    cells = {mode: [handle.matmul_thread_cell(mode, t) for t in range(256)] for mode in (3, 4)}
    assert handle.matmul_thread_cell(2, 0) == handle.matmul_thread_cell(4, 256) == -1
    for mode, layout in cells.items():
        assert sorted(layout) == list(range(256)), mode  # every thread of the 16 x 16 grid once
    for w in range(8):  # paired: each warp a 4 x 8 patch of cells
        warp = cells[4][32 * w:32 * w + 32]
        assert len({c // 16 for c in warp}) == 4 and len({c % 16 for c in warp}) == 8
    assert load_wavefronts_per_k(cells[3]) == 8 * 12  # A paired (16 lanes a row), B 4 wavefronts
    assert load_wavefronts_per_k(cells[4]) == 8 * 8   # both 2


@needs_sass
def test_views_cluster_reads_x_once_three_blocks_an_sm() -> None:
    """views_rows_cluster (noncontiguous_views, cluster): x reaches the SM only through cp.async into
    shared memory (LDGSTS, no LDG: each element loaded once), the 8 blocks of a cluster meet at two
    cluster barriers (arrive and wait, the second split around the stores), the merge reads the
    partials through distributed shared memory, the output is written by scalar stores (a warp's 32
    lanes, 128 contiguous bytes), and at most 80 registers with no local memory keep three 256-thread
    blocks an SM."""
    lib = library("views_cluster.cu")
    body = kernel(lib.sass("90"), "views_rows_cluster")
    assert re.search(r"\bLDGSTS\.E\.BYPASS\.128\b", body)
    assert not re.search(r"\bLDG\b", body), "x is read outside cp.async"
    assert count(r"\bUCGABAR_ARV\b", body) == 2 and count(r"\bUCGABAR_WAIT\b", body) == 2
    assert count(r"\bMEMBAR\b", body) == 1, "only the barrier that publishes the partials fences memory"
    assert count(r"\bLD\.E\.128\b", body) == 1  # the DSMEM load of one partial
    assert re.search(r"\bSTG\.E\b", body) and not re.search(r"\bSTG\.E\.(64|128)\b", body)
    assert not re.search(r"\b(LDL|STL)\b", body), "views_rows_cluster spills to local memory"
    usage = re.search(r"views_rows_cluster\w*:\s+REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", lib.resource_usage("90"))
    regs, stack, shared, local = map(int, usage.groups())
    assert regs <= 80 and stack == local == 0, usage.group(0)
    assert 3 * (64 * 1024 + shared + 1024) <= 228 * 1024, "three blocks (64 KiB tile each) no longer fit an SM"


REFUSED_VIEWS = [(8192, 1000, 8192, 0, 0), (8192, 16384, 8192, 0, 0), (8200, 8192, 8200, 0, 0),
                 (8192, 8192, 8192 + 16, 0, 0), (8194, 8192, 8192, 0, 0), (8192, 8192, 8192, 4, 0),
                 (8192, 8192, 8192, 0, 8), (8192, 0, 8192, 0, 0), (16, 512, 0, 0, 0)]


@needs_nvcc
@pytest.mark.parametrize(("ld", "rows", "cols", "x_offset", "out_offset"), REFUSED_VIEWS)
def test_views_cluster_refuses_what_it_cannot_index(ld: int, rows: int, cols: int, x_offset: int, out_offset: int) -> None:
    """views_rows_run returns -1 before any CUDA call (so this runs without a GPU, and the addresses are
    never touched) for rows not a multiple of 512 or above 8,192 (1,024 a block), columns not a multiple
    of 16, a row stride below the width or not 16-byte aligned, and unaligned pointers."""
    handle = ctypes.CDLL(str(library("views_cluster.cu").build("90")))
    fn = handle.views_rows_run
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p], ctypes.c_int
    base = 1 << 30
    assert fn(base + x_offset, 2 * base + out_offset, ld, rows, cols, None) == -1


@needs_sass
def test_views_tma_loads_by_tma_and_pushes_partials_without_a_gpu_fence() -> None:
    """views_rows_tma (noncontiguous_views, TMA): x reaches the SM only through TMA boxes (UTMALDG; no
    LDG, no LDGSTS), the partials go to the 8 ranks as four st.async a sending lane (STAS.128) and are
    read locally (no distributed shared memory load), the two cluster barriers are split (one around
    the load, one around the stores) and no fence reaches GPU scope (only MEMBAR.ALL.CTA, from the
    mbarrier init); the output is written by the cluster kernel's scalar stores; registers and shared memory
    still fit three 256-thread blocks an SM (the 64 KiB tile, 1 KiB of alignment slack)."""
    lib = library("views_cluster.cu")
    sass = lib.sass("90")
    body, cluster = kernel(sass, "views_rows_tma"), kernel(sass, "views_rows_cluster")
    assert re.search(r"\bUTMALDG\.2D\b", body)
    assert not re.search(r"\bLDG", body), "x is read outside TMA"
    assert count(r"\bSTAS\.128\b", body) == 4 and not re.search(r"\bLD\.E", body)
    assert count(r"\bUCGABAR_ARV\b", body) == 2 and count(r"\bUCGABAR_WAIT\b", body) == 2
    assert re.findall(r"\bMEMBAR\.\S+", body) == ["MEMBAR.ALL.CTA"]
    assert re.search(r"\bSTG\.E\b", body) and not re.search(r"\bSTG\.E\.(64|128)\b", body)
    assert not re.search(r"\b(LDL|STL)\b", body), "views_rows_tma spills to local memory"
    # the second pass, the merge and the output formula compile to the same floating-point work
    for op in (r"\bFFMA\b", r"\bFMUL\b", r"\bMUFU\.EX2\b", r"\bMUFU\.RCP\b", r"\bMUFU\.RSQ\b"):
        assert count(op, body) == count(op, cluster), op
    usage = re.search(r"views_rows_tma\w*:\s+REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", lib.resource_usage("90"))
    regs, stack, shared, local = map(int, usage.groups())
    assert regs <= 80 and stack == local == 0, usage.group(0)
    assert 3 * (65 * 1024 + shared + 1024) <= 228 * 1024, "three blocks (64 KiB tile each) no longer fit an SM"


@needs_nvcc
@pytest.mark.parametrize(("ld", "rows", "cols", "x_offset", "out_offset"), REFUSED_VIEWS)
def test_views_tma_refuses_what_it_cannot_index(ld: int, rows: int, cols: int, x_offset: int, out_offset: int) -> None:
    """views_rows_tma_run refuses the cluster kernel's unindexable shapes with -1 before any CUDA call."""
    fn = ctypes.CDLL(str(library("views_cluster.cu").build("90"))).views_rows_tma_run
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p], ctypes.c_int
    base = 1 << 30
    assert fn(base + x_offset, 2 * base + out_offset, ld, rows, cols, None) == -1
