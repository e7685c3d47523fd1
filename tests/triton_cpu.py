"""Triton kernels checked without a GPU, shared by the chapters' tests: the interpreter fix their
interpreted scripts apply first, and compiling a kernel for sm_90 to read its PTX, SASS and resources.

The Triton 3.6 interpreter calls int() on one-element numpy arrays, which numpy >= 2.4 refuses
(triton-lang/triton#9171, fixed upstream by #9172 after 3.6): ``INTERPRETER_FIX`` (source text to
run before a kernel is interpreted) applies the one-line fix, so loops whose bounds depend on the
program id or on a runtime argument run there."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from ci_triton_scripts import assert_ran, run_scripts

from aisp.harness.loader import import_module_at
from aisp.kits import native

ROOT = Path(__file__).resolve().parents[1]

INTERPRETER_FIX = """
from triton.runtime import interpreter as _interp
_patch = _interp._patch_lang_tensor
def _fixed(tensor, scope):
    _patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
_interp._patch_lang_tensor = _fixed
"""


def run_interpreted(script: str, timeout: int = 900) -> None:
    """Run ``script`` (Python source) with TRITON_INTERPRET=1 from the repository root, after
    ``INTERPRETER_FIX``, as :func:`ci_triton_scripts.run_scripts` runs a module's scripts (a fork of a
    process that imported torch and triton); assert it exits 0 and prints ``interpreted ok``."""
    pytest.importorskip("triton")
    assert_ran(run_scripts({"script": INTERPRETER_FIX + script}, timeout=timeout), "script", "interpreted ok")


SMEM_PER_BLOCK = 227 * 1024
"""The most shared memory one block may take on sm_90."""


def compile_sm90(kernel: str, sig: dict[str, str], consts: dict[str, int | bool], options: dict[str, int],
                 divisible: tuple[str, ...] = ()):
    """``kernel`` ("chNN/module:function", from the repository root) specialized as a pair runs it
    (pointers 16-byte aligned; the integer arguments named in ``divisible`` multiples of 16, as
    Triton's launcher specializes them when they are), compiled for sm_90 without a GPU."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    module, name = kernel.split(":")
    fn = getattr(import_module_at(ROOT / f"{module}.py"), name)
    sig = sig | dict.fromkeys(consts, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, (a, t) in enumerate(sig.items()) if t.startswith("*") or a in divisible}
    return triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=options)


_READ: dict[tuple[str, str], str | list[str]] = {}
"""cuobjdump's and ptxas's readings in this process, by (tool and flag, sha256 of the code): a module's
tests read the same kernel again (19 of ch18's 98 cuobjdump runs, 6 of its 25 ptxas runs)."""


def _once(tool: str, code: bytes, read):
    key = (tool, hashlib.sha256(code).hexdigest())
    if key not in _READ:
        _READ[key] = read()
    return _READ[key]


def cuobjdump(compiled, flag: str) -> str:
    """``cuobjdump flag`` on a compiled kernel's cubin (-sass: its SASS; -res-usage: registers, local memory)."""
    tool = native.cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not available")
    return _once(f"cuobjdump {flag}", compiled.asm["cubin"], lambda: _cuobjdump(tool, compiled, flag))


def _cuobjdump(tool: str, compiled, flag: str) -> str:
    cubin = Path(os.environ.get("TMPDIR", "/tmp")) / f"sm90_{compiled.name}_{os.getpid()}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    try:
        env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([tool, flag, str(cubin)], capture_output=True, text=True, env=env, check=True).stdout
    finally:
        cubin.unlink()


def resource_usage(compiled) -> dict[str, int]:
    """Registers, stack and local memory (bytes) a thread of the compiled kernel uses (cuobjdump -res-usage)."""
    return {k: int(v) for k, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", cuobjdump(compiled, "-res-usage"))}


def fits_sm90(compiled) -> dict[str, int]:
    """Assert the compiled kernel spills no register (no local memory or stack) and takes at most the
    shared memory one block may; returns its resource usage for further checks."""
    usage = resource_usage(compiled)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"registers spill: {usage}"
    assert compiled.metadata.shared <= SMEM_PER_BLOCK, compiled.metadata.shared
    return usage


def assert_tma_and_wgmma(compiled, tiles: str) -> None:
    """Assert the compiled kernel loads ``tiles`` by TMA (cp.async.bulk.tensor, no per-thread
    cp.async) and multiplies with Hopper's wgmma (HGMMA in its SASS)."""
    ptx = compiled.asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and "cp.async.cg" not in ptx, f"{tiles} tiles are not loaded by TMA"
    assert "HGMMA" in cuobjdump(compiled, "-sass"), "the products do not use Hopper's wgmma"


def wgmma_serialized(sass: str) -> bool:
    """Whether ptxas serialized the kernel's wgmma: every HGMMA waits for itself (carries gsb0 and is
    followed by WARPGROUP.DEPBAR), which ptxas does when it lacks registers or finds an in-flight
    accumulator written by other instructions (advisories C7512, C7515), instead of one wait a group."""
    hgmma = [line for line in sass.splitlines() if "HGMMA." in line]
    return bool(hgmma) and all("gsb0" in line for line in hgmma)


def ex2_while_wgmma_in_flight(code: str, commit: str, wait: str, ex2: str) -> bool:
    """Whether an exp2 (``ex2``) stands between a wgmma group's ``commit`` and the next ``wait`` in the
    program text: that exp2 runs while the tensor cores work. In PTX: wgmma.commit_group,
    wgmma.wait_group, ex2.approx; in SASS: WARPGROUP.ARRIVE, WARPGROUP.DEPBAR, MUFU.EX2."""
    in_flight = False
    for line in code.splitlines():
        if commit in line:
            in_flight = True
        elif wait in line:
            in_flight = False
        elif ex2 in line and in_flight:
            return True
    return False


def ptxas_advisories(compiled) -> list[str]:
    """ptxas's performance advisories (C75xx, e.g. C7512: wgmma serialized for lack of registers) on
    the compiled kernel's PTX, assembled again for sm_90a by Triton's own ptxas (the PTX carries the
    kernel's ``.maxnreg``); Triton's compile reads that log only when ptxas fails."""
    return list(_once("ptxas", compiled.asm["ptx"].encode(), lambda: _ptxas_advisories(compiled)))  # a copy: callers may edit it


def _ptxas_advisories(compiled) -> list[str]:
    from triton import knobs
    ptx = Path(os.environ.get("TMPDIR", "/tmp")) / f"sm90_{compiled.name}_{os.getpid()}.ptx"
    ptx.write_text(compiled.asm["ptx"])
    try:
        proc = subprocess.run([knobs.nvidia.ptxas.path, "-arch=sm_90a", "-v", str(ptx), "-o", os.devnull],
                              capture_output=True, text=True, check=True)
    finally:
        ptx.unlink()
    return re.findall(r"\(C75\d\d\).*", proc.stdout + proc.stderr)


def key_loop_events(ptx: str) -> list[str]:
    """The order of the first key loop in a kernel's PTX (the first back edge whose body holds a wgmma),
    runs of one kind merged: "wait" (a TMA barrier wait), "mma" (a wgmma group committed), "ex2" (the
    softmax's exp2) and "tma" (a TMA copy issued)."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M)}
    for edge in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        start = labels.get(edge.group(1))
        if start is not None and start < edge.start() and "wgmma.mma_async" in ptx[start:edge.start()]:
            events: list[str] = []
            for line in ptx[start:edge.start()].splitlines():
                for key, tag in (("mbarrier.try_wait", "wait"), ("wgmma.commit_group", "mma"), ("ex2.approx", "ex2"),
                                 ("cp.async.bulk.tensor", "tma")):
                    if key in line and events[-1:] != [tag]:
                        events.append(tag)
            return events
    raise AssertionError("no key loop with a wgmma in the PTX")


PAIR_SCRIPT = """
import dataclasses, sys
from pathlib import Path
import torch
sys.path[:0] = [{folder!r}, {tests!r}]
from refill_check import check_pair
from aisp.harness.loader import import_module_at
mods = {{m: import_module_at(Path({folder!r}) / f"{{m}}.py") for m in ({baseline!r}, {optimized!r})}}
{patch}
def build(module, seed):
    bench = mods[module].get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    bench.workload = dataclasses.replace(bench.workload, **{sizes!r})
    return bench
check_pair(build, {baseline!r}, {optimized!r})
print("interpreted ok")
"""


def verify_pair_interpreted(folder: Path, baseline: str, optimized: str, sizes: dict, patch: str = "") -> None:
    """The pair's ``optimized`` variant (a Triton kernel) matches ``baseline`` on a CPU under the Triton
    interpreter at the workload ``sizes``: two seeds, another seed's answer rejected, refilled inputs.
    ``patch``: source run after the two modules are imported (``mods``: module name to module)."""
    run_interpreted(PAIR_SCRIPT.format(folder=str(folder), tests=str(ROOT / "tests"), baseline=baseline,
                                       optimized=optimized, sizes=sizes, patch=patch))
