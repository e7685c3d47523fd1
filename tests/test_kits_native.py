"""aisp.kits.native: the cache key, reuse without nvcc, concurrent builds, nvcc's errors, skip
reasons, sm_90a for Hopper-only code (on a CPU with nvcc), a kernel on the caller's stream (on a
GPU), and CI's check that every .cu file in the repository compiles for sm_90."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aisp.harness.loader import import_module_at
from aisp.kits import native

REPO = Path(__file__).resolve().parents[1]
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
gpu = pytest.mark.gpu
CUDA_SOURCES = sorted([*REPO.glob("ch*/**/*.cu"), *REPO.glob("aisp/kits/*.cu")])
"""The chapters' CUDA C++ and the kits' sources they share (aisp/kits/cutlass_sgemm.cu)."""

ANSWER = """#include "answer.cuh"
__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
extern "C" int add_one_on(float* x, int n, cudaStream_t s) {
  add_one<<<(n + 255) / 256, 256, 0, s>>>(x, n);
  return (int)cudaGetLastError();
}
extern "C" int answer() { return ANSWER; }
"""
SETMAXNREG = '__global__ void k() { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); }\n'


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def answer_library(folder: Path, value: int = 42, flags: tuple[str, ...] = ()) -> native.Library:
    """A library whose ``answer()`` returns ``value`` (set in a local header), callable without a GPU."""
    folder.mkdir(exist_ok=True)
    (folder / "answer.cu").write_text(ANSWER)
    (folder / "answer.cuh").write_text(f"#define ANSWER {value}\n")
    return native.Library((folder / "answer.cu",), flags=flags)


def counting_nvcc(folder: Path, monkeypatch: pytest.MonkeyPatch, sleep_s: float = 0.0) -> Path:
    """Put an nvcc first on PATH that logs each compile (not ``--version``) and then runs the real
    one; returns the log."""
    log, bindir = folder / "nvcc.log", folder / "bin"
    bindir.mkdir()
    (bindir / "nvcc").write_text(f'#!/bin/sh\ncase "$*" in *--version*) ;; *) echo "$*" >> {log}; '
                                 f'sleep {sleep_s};; esac\nexec {NVCC} "$@"\n')
    (bindir / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def compiles(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_cache_dir_default_and_override(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native.cache_dir() == cache
    monkeypatch.delenv("AISP_NATIVE_CACHE")
    assert native.cache_dir() == Path.home() / ".cache" / "aisp" / "native"


def test_key_follows_sources_headers_flags_arch_and_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "nvcc", lambda: "/opt/nvcc")
    monkeypatch.setattr(native, "nvcc_version", lambda path: "release 13.0")
    lib = answer_library(tmp_path / "a")
    key = lib.key("90")
    assert answer_library(tmp_path / "b").key("90") == key  # same contents elsewhere: same library
    assert lib.key("100") != key
    assert answer_library(tmp_path / "a", flags=("-rdc=true",)).key("90") != key
    assert answer_library(tmp_path / "a", value=7).key("90") != key  # the local header changed
    (tmp_path / "a" / "answer.cu").write_text(ANSWER + "// edited\n")
    assert lib.key("90") != key


def test_key_follows_nvcc_version_and_listed_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "nvcc", lambda: "/opt/nvcc")
    monkeypatch.setattr(native, "nvcc_version", lambda path: "release 13.0")
    lib, header = answer_library(tmp_path), tmp_path / "cutlass.h"
    header.write_text("// v1\n")
    listed = native.Library(lib.sources, headers=(header,))
    before, before_listed = lib.key("90"), listed.key("90")
    header.write_text("// v2\n")
    assert lib.key("90") == before and listed.key("90") != before_listed
    monkeypatch.setattr(native, "nvcc_version", lambda path: "release 13.1")
    assert lib.key("90") != before


def test_hopper_only_code_targets_sm90a(tmp_path: Path) -> None:
    (tmp_path / "wg.cuh").write_text("// wgmma.mma_async lives here\n")
    (tmp_path / "uses_header.cu").write_text('#include "wg.cuh"\n')
    (tmp_path / "plain.cu").write_text("__global__ void k() {}\n")
    hopper = native.Library((tmp_path / "uses_header.cu",))
    assert hopper.needs_sm90a() and hopper.target("90") == "90a"
    with pytest.raises(RuntimeError, match="sm_90 GPU.*not sm_100"):
        hopper.target("100")
    assert native.Library((tmp_path / "plain.cu",)).target("100") == "100"
    assert native.Library((tmp_path / "plain.cu",), hopper_only=True).target("90") == "90a"
    assert not native.Library((tmp_path / "uses_header.cu",), hopper_only=False).needs_sm90a()


def test_without_nvcc_the_reason_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert "nvcc" in (native.unavailable() or "")
    with pytest.raises(RuntimeError, match="nvcc .* not on PATH"):
        answer_library(tmp_path).build("90")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the reason given on a machine without a GPU")
def test_without_gpu_the_reason_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nvcc").write_text("#!/bin/sh\n")
    (tmp_path / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "CUDA GPU" in (native.unavailable() or "")


@needs_nvcc
def test_second_build_reuses_the_library_without_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = counting_nvcc(tmp_path, monkeypatch)
    first = answer_library(tmp_path / "src").build("80")
    assert compiles(log) == 1 and first.name.startswith("libanswer-sm80-")
    assert answer_library(tmp_path / "src").build("80") == first
    assert compiles(log) == 1
    assert ctypes.CDLL(str(first)).answer() == 42  # cudart is linked statically: loads without a GPU
    changed = answer_library(tmp_path / "src", value=43).build("80")
    assert changed != first and compiles(log) == 2
    assert sorted(p.name for p in changed.parent.glob("*.so")) == sorted([first.name, changed.name])


BUILD_ONE = """import sys
from pathlib import Path
from aisp.kits import native
print(native.Library((Path(sys.argv[1]),)).build("80"))
"""


@needs_nvcc
def test_two_processes_building_at_once_build_once(tmp_path: Path, cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log = counting_nvcc(tmp_path, monkeypatch, sleep_s=2.0)  # both wait on the lock, not on the race
    source = answer_library(tmp_path / "src").sources[0]
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_ONE, str(source)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1 and compiles(log) == 1
    path = paths.pop()
    assert ctypes.CDLL(path).answer() == 42
    assert [p.name for p in cache.iterdir() if p.suffix != ".lock"] == [Path(path).name]  # no temp file left


@needs_nvcc
def test_broken_source_raises_with_nvccs_message(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "broken.cu").write_text("__global__ void k(float* x) { x[0] = undefined_name; }\n")
    broken = native.Library((tmp_path / "broken.cu",))
    with pytest.raises(RuntimeError, match="(?s)nvcc failed.*undefined_name"):
        broken.build("90")
    assert not list(cache.glob("*.so"))
    with pytest.raises(RuntimeError, match="undefined_name"):
        broken.compile_only("90")


@needs_nvcc
def test_hopper_only_code_compiles_for_sm90a_only(tmp_path: Path) -> None:
    (tmp_path / "regs.cu").write_text(SETMAXNREG)
    native.Library((tmp_path / "regs.cu",)).compile_only("90")
    with pytest.raises(RuntimeError, match="not supported on .target 'sm_90'"):
        native.Library((tmp_path / "regs.cu",), hopper_only=False).compile_only("90")


def cublas_flags(src: Path) -> tuple[str, ...]:
    """cuBLAS's -I/-l flags for a source that includes it (ch01's finder), NVSHMEM's for one that
    includes nvshmem.h (ch04's); a skip when the library is absent."""
    if "<nvshmem.h>" in src.read_text():
        finder = import_module_at(REPO / "ch04" / "ch04_nvshmem.py")
        if (home := finder.nvshmem_home()) is None:
            pytest.skip(finder.MISSING)
        return finder.nvcc_flags(home)
    if "cublas" not in src.read_text():
        return ()
    flags = import_module_at(REPO / "ch01" / "find_cublas.py").cublas_flags()
    if not flags and not (Path(native.nvcc()).resolve().parents[1] / "include" / "cublas_v2.h").exists():
        pytest.skip("cuBLAS headers not found (CUDA toolkit or the nvidia-cublas wheel)")
    return tuple(flags)


def built_by_chapter_tests() -> set[Path]:
    """The sources of every library a chapter's own test builds for sm_90 (nvcc compiles and links it
    with the flags its pair uses, under the same nvcc and library conditions as here): compiling them
    again below would repeat that check, at about a second of CI a source."""
    import test_ch01_cuda_compile as ch01
    import test_ch02_pairs as ch02
    import test_ch04_device_put as ch04
    import test_ch06_pairs as ch06
    import test_ch07_cuda as ch07
    import test_ch08_pairs as ch08
    import test_ch09_cuda as ch09
    import test_ch10_cuda as ch10
    import test_ch10b_pairs as ch10b
    import test_ch11_cuda_compile as ch11
    import test_ch12_cuda_compile as ch12
    import test_ch19_stream as ch19

    libraries = [*(import_module_at(ch01.CH01 / f"{m}.py").LIBRARY for m in ch01.NATIVE_PAIRS), ch04.BASE.STAGE,
                 *(ch06.library(m) for m in ch06.LIBRARIES), *(ch07.library(s) for s in ch07.LIBRARY_OF),
                 *(native.Library((ch08.CH08 / s,)) for s in ch08.ENTRY_POINTS),
                 *(ch09.library(m) for m in ch09.ENTRY_POINTS), *(ch10.COMMON.library(k) for k in ch10.COMMON.KERNELS),
                 *(ch10b.load(m).LIBRARY for m in ch10b.LIBRARY_OF.values()), *ch11.libraries().values(),
                 *(ch12.declared(m)[0] for m in ch12.BASELINES), ch19.stream().LIBRARY]
    if native.cuobjdump() is not None:  # ch02's SASS test (its three libraries built) skips without cuobjdump
        libraries += [ch02.load(m).LIBRARY for m in ch02.SASS_16_BYTE]
    if (home := ch04.NVSHMEM.nvshmem_home()) is not None:  # without NVSHMEM both tests skip its ring
        libraries.append(ch04.NVSHMEM.ring_library(home))
    return {src.resolve() for lib in libraries for src in lib.sources}


BUILT_ELSEWHERE = built_by_chapter_tests()


def test_the_repository_has_cuda_sources() -> None:
    assert {p.name for p in CUDA_SOURCES} >= {"gemm_batched.cu", "coalescing.cu", "arithmetic_intensity.cu"}
    assert BUILT_ELSEWHERE <= {p.resolve() for p in CUDA_SOURCES}, "a chapter library builds a source outside ch*/ and aisp/kits/"


@needs_nvcc
@pytest.mark.parametrize("src", [p for p in CUDA_SOURCES if p.resolve() not in BUILT_ELSEWHERE],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_cuda_source_compiles_for_sm90(src: Path) -> None:
    """CI: each .cu compiles (no link, no run) for sm_90, or sm_90a where it is Hopper-only; those a
    chapter test builds are compiled and linked there (:func:`built_by_chapter_tests`)."""
    native.Library((src,), flags=cublas_flags(src)).compile_only("90")


@gpu
def test_kernel_runs_on_the_callers_stream(tmp_path: Path) -> None:
    assert native.unavailable() is None, native.unavailable()
    lib = answer_library(tmp_path).load()
    lib.add_one_on.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert native.stream().value == side.cuda_stream
        x = torch.full((1 << 24,), 2.0, device="cuda")
        native.check(lib.add_one_on(x.data_ptr(), x.numel(), native.stream()), "add_one_on")
        x.mul_(3)
    side.synchronize()
    assert bool((x == 9).all())


@gpu
def test_hopper_only_library_loads_only_on_sm90(tmp_path: Path) -> None:
    (tmp_path / "regs.cu").write_text(SETMAXNREG)
    lib = native.Library((tmp_path / "regs.cu",))
    if torch.cuda.get_device_capability() == (9, 0):
        assert native.unavailable(hopper_only=True) is None
        lib.load()
    else:
        assert "sm_90" in (native.unavailable(hopper_only=True) or "")
        with pytest.raises(RuntimeError, match="sm_90"):
            lib.load()


needs_cuobjdump = pytest.mark.skipif(NVCC is None or native.cuobjdump() is None,
                                     reason="nvcc or cuobjdump (nvidia-cuda-cuobjdump wheel) missing")


@needs_cuobjdump
def test_sass_shows_the_instructions_of_the_built_kernel(tmp_path: Path, cache: Path) -> None:
    src = tmp_path / "loads.cu"
    src.write_text('extern "C" __global__ void add_one(float* a) { a[threadIdx.x] += 1.0f; }\n')
    sass = native.Library((src,)).sass("90")
    assert "add_one" in sass and "LDG.E" in sass and "STG.E" in sass
    assert "LDGSTS" not in sass and "HGMMA" not in sass
    usage = native.Library((src,)).resource_usage("90")
    assert "add_one" in usage and "REG:" in usage


def test_sass_without_cuobjdump_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "cuobjdump", lambda: None)
    with pytest.raises(RuntimeError, match="cuobjdump is not on PATH"):
        native.Library((tmp_path / "x.cu",)).sass("90")


def test_stream_reads_the_raw_handle_of_the_device_it_names_or_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """native.stream asks torch for the raw stream of the device's index, or of the current device when the
    device has none (or is not given), without building a Stream object; where torch lacks the raw call,
    it takes torch.cuda.current_stream."""
    asked: list[int] = []
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda i: asked.append(i) or 1000 + i, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert native.stream(torch.device("cuda", 1)).value == 1001
    assert native.stream(torch.device("cuda")).value == 1003
    assert native.stream().value == 1003
    assert asked == [1, 3, 3]
    monkeypatch.delattr(torch._C, "_cuda_getCurrentRawStream")

    class Fake:
        cuda_stream = 77

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Fake())
    assert native.stream(torch.device("cuda", 1)).value == 77


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_stream_is_the_current_stream_on_the_gpu() -> None:
    dev = torch.device("cuda", torch.cuda.current_device())
    side = torch.cuda.Stream(dev)
    # c_void_p(0).value is None: the legacy default stream's handle is 0
    assert (native.stream(dev).value or 0) == torch.cuda.current_stream(dev).cuda_stream
    with torch.cuda.stream(side):
        assert native.stream(dev).value == native.stream().value == side.cuda_stream != 0
