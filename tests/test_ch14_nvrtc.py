"""ch14:runtime_compiled_kernel's NVRTC source without a GPU.

1. The kernel's own text (``KERNEL``: grid walk, row and column tails, bias columns, where it
   rounds) compiled by g++ as host code and run thread by thread over the grid ``launch_shape``
   gives, against eager PyTorch on the CPU, at sizes with a partial last block and an odd row
   count; the two sm_80 PTX helpers are replaced by software ones (round to nearest even).
2. Its SASS for sm_90 (nvcc + cuobjdump; NVRTC runs the same compiler): no spill within the
   launch bounds' registers, all four 128-bit loads of a loop pass before its first store, and few
   enough instructions a 16-byte pack that issuing them takes at most half the time the HBM needs
   for the pack's bytes on an H200 (the first version ran 441 and was issue-bound); eager's IEEE
   division planted in the source makes the check fire.
3. NVRTC itself (the wheel's libnvrtc) compiles the source with the pair's options into a cubin
   within the launch bounds, and refuses it without the -D defines.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare
from aisp.kits import native

CH14 = Path(__file__).resolve().parents[1] / "ch14"
OPT = import_module_at(CH14 / "optimized_runtime_compiled_kernel.py")
BASE = import_module_at(CH14 / "baseline_runtime_compiled_kernel.py")

HOST_SHIM = r"""
#include <cmath>
#include <cstring>
struct uint4 { unsigned int x, y, z, w; };
static uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
struct Dim3 { unsigned int x, y; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
static float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static float __fdividef(float a, float b) { return a / b; }
static unsigned int bf16_rne(float f) {  // finite inputs
    unsigned int u; std::memcpy(&u, &f, 4);
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
static unsigned int pack_bf2(float lo, float hi) { return bf16_rne(lo) | bf16_rne(hi) << 16; }
static float half(unsigned int w, int k) { return __uint_as_float(k ? w & 0xFFFF0000u : w << 16); }
static unsigned int fma_bf2(unsigned int a, unsigned int b, unsigned int c) {  // exact in double here
    float r[2];
    for (int k = 0; k < 2; ++k) r[k] = (float)((double)half(a, k) * half(b, k) + half(c, k));
    return pack_bf2(r[0], r[1]);
}
"""
LAUNCH = r"""
extern "C" void launch(unsigned gx, unsigned gy, unsigned bx, const uint4* gate, const uint4* up,
                       const uint4* bias_g, const uint4* bias_u, uint4* out, int rows, int row_packs) {
    gridDim = {gx, gy}; blockDim = {bx, 1};
    for (blockIdx.y = 0; blockIdx.y < gy; ++blockIdx.y)
        for (blockIdx.x = 0; blockIdx.x < gx; ++blockIdx.x)
            for (threadIdx.x = 0; threadIdx.x < bx; ++threadIdx.x)
                bias_swiglu(gate, up, bias_g, bias_u, out, rows, row_packs);
}
"""
DEFINES = [o for o in OPT.OPTIONS if o.startswith("-D")]


def host_kernel(tmp_path: Path, kernel: str) -> ctypes.CDLL:
    """``kernel`` (the pair's KERNEL text, or a planted fault of it) built by g++ as a host library."""
    src, lib = tmp_path / "bias_swiglu_host.cpp", tmp_path / "libbias_swiglu_host.so"
    src.write_text(HOST_SHIM + kernel + LAUNCH)
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wno-unknown-pragmas", *DEFINES,
                    str(src), "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def emulate(lib: ctypes.CDLL, rows: int, dim: int, sms: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(eager's output, the emulated kernel's) on CPU tensors the pair's setup() would make."""
    bench = BASE.get_benchmark()
    bench.device, bench.seed, bench.workload = torch.device("cpu"), seed, BASE.gate_workload(rows=rows, dim=dim)
    bench.setup()
    ref = bench.run()
    out = torch.full_like(ref, float("nan"))
    (gx, gy), (bx,) = OPT.launch_shape(rows, dim // 8, sms)
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (bench.gate, bench.up, bench.bias_g, bench.bias_u, out)]
    lib.launch(gx, gy, bx, *ptrs, ctypes.c_int(rows), ctypes.c_int(dim // 8))
    return ref, out


SHAPES = [(7, 24, 1), (13, 8 * 257, 1), (5, 8, 132), (64, 512, 2)]
"""(rows, dim, SMs): 3 packs a row in a block of 256; 257 packs (a second block with one live
thread); one pack a row; and full blocks. With few SMs each grid row strides over several rows,
and the odd row counts leave the second of a pass's two rows past the end."""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize(("rows", "dim", "sms"), SHAPES)
def test_kernel_text_run_on_the_host_matches_eager(tmp_path: Path, rows: int, dim: int, sms: int) -> None:
    lib = host_kernel(tmp_path, OPT.KERNEL)
    ref, out = emulate(lib, rows, dim, sms, seed=0)
    compare([("out", ref)], [("out", out)], BASE.WORKLOAD)
    same = (ref.view(torch.int16) == out.view(torch.int16)).float().mean().item()
    assert same > 0.99, f"only {same:.4f} of the outputs equal eager's bits: a rounding step moved"


FAULTS = {
    "skips rows": ("r += ROWS * gridDim.y", "r += (ROWS + 1) * gridDim.y"),
    "one bias column": ("bias_g[col]", "bias_g[0]"),
    "drops the up bias": ("fma_bf2(u, BF2_ONE, bu)", "u"),
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("fault", FAULTS)
def test_planted_faults_fail_verification(tmp_path: Path, fault: str) -> None:
    old, new = FAULTS[fault]
    assert old in OPT.KERNEL
    ref, out = emulate(host_kernel(tmp_path, OPT.KERNEL.replace(old, new)), 13, 8 * 257, 1, seed=1)
    with pytest.raises(VerificationError):
        compare([("out", ref)], [("out", out)], BASE.WORKLOAD)


def test_launch_shape_is_one_wave_and_covers_the_rows() -> None:
    (gx, gy), (bx,) = OPT.launch_shape(16384, 1024, 132)
    assert (gx, bx) == (4, OPT.THREADS) and gx * gy == 132 * OPT.BLOCKS_PER_SM
    assert OPT.launch_shape(3, 1, 132)[0] == (1, 3)  # never more grid rows than rows
    assert OPT.launch_shape(10, 8192, 1)[0] == (32, 1)  # a row wider than one wave still gets a block row


H200_SMS, H200_SCHEDULERS, H200_CLOCK_HZ, H200_HBM_COPY = 132, 4, 1.98e9, 4.2e12
PACK_BYTES = 3 * 16
"""A pack's HBM bytes: 16 of gate and of up read, 16 of out written."""
ISSUE_BUDGET = 0.5 * PACK_BYTES / H200_HBM_COPY * H200_SMS * H200_SCHEDULERS * H200_CLOCK_HZ * 32
"""SASS instructions a thread may run a pack while issuing them takes at most half the time the
HBM needs for the bytes (each scheduler issues one warp instruction a clock): about 191."""
RESOURCE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")


def sass_loop(sass: str) -> list[str]:
    """The instructions of the kernel's loop: from the target of the one backward branch to it."""
    code = [(int(m[1], 16), m[2].strip()) for m in INSTRUCTION.finditer(sass)]
    branches = [(int(m[1], 16), addr) for addr, op in code if (m := re.search(r"\bBRA 0x([0-9a-f]+)", op))]
    [(start, end)] = [(target, addr) for target, addr in branches if target < addr]
    return [op for addr, op in code if start <= addr <= end]


def sass_problems(source: str, folder: Path) -> list[str]:
    """What keeps ``source``, built for sm_90 with the pair's defines, from streaming at HBM speed:
    spills or more registers than the launch bounds allow, a load after a store in the loop (rows
    not loaded first), calls or local memory in the loop, more instructions a pack than the budget."""
    src = folder / "bias_swiglu.cu"
    src.write_text(source)
    lib = native.Library((src,), flags=tuple(DEFINES))
    regs, stack, local = map(int, RESOURCE.search(lib.resource_usage("90")).groups())
    loop = sass_loop(lib.sass("90"))
    loads = [i for i, op in enumerate(loop) if "LDG.E.128" in op]
    stores = [i for i, op in enumerate(loop) if "STG.E.128" in op]
    checks = {
        f"{regs} registers, {stack} B of stack, {local} B of local memory":
            regs * OPT.THREADS * OPT.BLOCKS_PER_SM > 65536 or stack or local,
        f"{len(loads)} 128-bit loads, {len(stores)} stores, not all loads first":
            len(loads) != 2 * OPT.ROWS or len(stores) != OPT.ROWS or max(loads) > min(stores),
        "a call or local memory in the loop": any(re.search(r"\b(CALL|LDL|STL)", op) for op in loop),
        f"{len(loop) / OPT.ROWS:.0f} instructions a pack (budget {ISSUE_BUDGET:.0f})": len(loop) / OPT.ROWS > ISSUE_BUDGET,
    }
    return [what for what, bad in checks.items() if bad]


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump")


@needs_nvcc
def test_sass_streams_within_the_launch_bounds_and_the_issue_budget(tmp_path: Path) -> None:
    assert sass_problems(OPT.SOURCE, tmp_path) == []


@needs_nvcc
def test_ieee_division_is_flagged(tmp_path: Path) -> None:
    """The planted fault: eager's exact division (a subroutine call and a stack) is over budget."""
    ieee = OPT.SOURCE.replace("__fdividef(a, 1.0f + expf(-a))", "a / (1.0f + expf(-a))")
    assert ieee != OPT.SOURCE
    problems = sass_problems(ieee, tmp_path)
    assert any("call" in p for p in problems) and any("budget" in p for p in problems), problems


def libnvrtc() -> ctypes.CDLL | None:
    """NVRTC from the nvidia-cuda-nvrtc wheel or the system; None when there is none."""
    try:
        import nvidia
        wheels = [str(p) for root in nvidia.__path__ for p in sorted(Path(root).glob("cu*/lib/libnvrtc.so*"))]
    except ImportError:
        wheels = []
    for path in [*wheels, ctypes.util.find_library("nvrtc")]:
        if path:
            if path in wheels:  # it opens its builtins by name, and the wheel's folder is not on the loader's
                for builtins in sorted(Path(path).parent.glob("libnvrtc-builtins.so*")):  # path: load them first
                    ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path)
    return None


def nvrtc_cubin(source: str, options: tuple[str, ...]) -> tuple[int, str, bytes]:
    """(status, log, cubin) of NVRTC compiling ``source`` for sm_90, as CuPy's RawKernel does."""
    lib = libnvrtc()
    if lib is None:
        pytest.skip("needs NVRTC (libnvrtc)")
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"bias_swiglu.cu", 0, None, None) == 0
    opts = [o.encode() for o in (*options, "--gpu-architecture=sm_90")]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    cubin = b""
    if status == 0:
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, buf)
        cubin = buf.raw
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return status, log.value.decode(errors="replace"), cubin


def test_nvrtc_compiles_the_source_with_the_pairs_options_within_the_launch_bounds(tmp_path: Path) -> None:
    """The runtime compiler itself, headers and all (none): the source builds with OPTIONS, and the
    cubin it makes keeps the registers the grid assumes; without the -D defines it fails."""
    status, log, cubin = nvrtc_cubin(OPT.SOURCE, OPT.OPTIONS)
    assert status == 0, log
    assert nvrtc_cubin(OPT.SOURCE, ("--std=c++17",))[0] != 0  # THREADS and the rest come from OPTIONS
    tool = native.cuobjdump()
    if tool is None:
        pytest.skip("needs cuobjdump")
    path = tmp_path / "bias_swiglu.cubin"
    path.write_bytes(cubin)
    usage = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    regs, stack, local = map(int, RESOURCE.search(usage).groups())
    assert regs * OPT.THREADS * OPT.BLOCKS_PER_SM <= 65536 and stack == local == 0, usage
