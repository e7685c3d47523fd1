"""The SIMT FMA ceilings of ``aisp peak`` (aisp/peak/simt.py, simt_fma.cu): the kernels' main loops
are FFMA / HFMA2 with nothing loaded (their sm_90 SASS, compiled on a CPU with nvcc), a check that
fires on a loop with a load, with too few FMAs or with packed fp16 FMAs on one pipe only; skipped with the reason on a CPU; measured on a GPU,
the packed fp16 rate above the fp32 one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from aisp.kits import native
from aisp.peak import simt
from aisp.peak.measure import measure_peaks
from aisp.peak.probes import PeakConfig

CHAINS = 16
"""Independent chains per thread in simt_fma.cu: the main loop holds at least one FMA per chain."""
KERNELS = {"simt_fp32": "ffma_chains", "simt_fp16": "hfma2_chains"}
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
LOADS = re.compile(r"^U?LD")
"""Any load: LDG, LDS, LDL, LDC, LD, ULDC."""
needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                 reason="needs nvcc and cuobjdump")


def function_sass(sass: str, kernel: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of each instruction of ``kernel`` (a part of its mangled name)."""
    parts = re.split(r"\n\s*Function : ", sass)
    body = next(p for p in parts[1:] if kernel in p.splitlines()[0])
    return [(int(a, 16), op, args.strip()) for a, _, op, args in INSTRUCTION.findall(body)]


def main_loop(code: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The instructions of the longest loop: from a backward branch's target to the branch."""
    loops = [(int(args.split()[0], 16), addr) for addr, op, args in code
             if op == "BRA" and args.startswith("0x") and int(args.split()[0], 16) < addr]
    start, end = max(loops, key=lambda se: se[1] - se[0])
    return [i for i in code if start <= i[0] <= end]


PIPES = {"simt_fp16": ("HFMA2", "HFMA2.MMA")}
"""Forms the loop must hold each of: packed fp16 FMAs issue to the FMA pipe (HFMA2) and to the MMA
pipe (HFMA2.MMA); a loop of one form measures one pipe (operands broadcast from one half, R.H0_H0,
take only the FMA pipe: the first probe read 66.2 TFLOP/s on an H200 that way)."""


def loop_problems(sass: str, kernel: str, fma: str, pipes: tuple[str, ...] = ()) -> list[str]:
    """Why ``kernel``'s main loop is not a pure FMA loop: a load in it, fewer ``fma`` (any of its forms,
    e.g. HFMA2.MMA) than chains, or one of ``pipes`` missing."""
    loop = main_loop(function_sass(sass, kernel))
    problems = [f"{op} at {addr:#06x} in the loop" for addr, op, _ in loop if LOADS.match(op)]
    problems += [f"no {form} in the loop: one pipe measured" for form in pipes
                 if not any(op == form for _, op, _ in loop)]
    fmas = sum(op == fma or op.startswith(f"{fma}.") for _, op, _ in loop)
    if fmas < CHAINS:
        problems.append(f"{fmas} {fma} in the loop, fewer than its {CHAINS} chains")
    if fmas < 0.9 * len(loop):
        problems.append(f"{fmas} {fma} of {len(loop)} instructions: the loop's overhead is not small")
    return problems


@pytest.fixture(scope="module")
def sass(tmp_path_factory: pytest.TempPathFactory) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.mktemp("native")))
        return simt.LIBRARY.sass("90")


@needs_tools
@pytest.mark.parametrize("name", list(simt.FMAS))
def test_the_main_loop_is_fma_chains_with_nothing_loaded(sass: str, name: str) -> None:
    fma = simt.FMAS[name][1]
    assert loop_problems(sass, KERNELS[name], fma, PIPES.get(name, ())) == []
    code = function_sass(sass, KERNELS[name])
    assert any(op.startswith("STG") for _, op, _ in code)  # the chains' sum is written: the work is kept


LOOP = """
        Function : _Z5k_fmaPf
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   FFMA R2, R2, R3, R4 ;
        /*0020*/                   {body}
        /*0030*/               @P0 BRA 0x10 ;
        /*0040*/                   STG.E desc[UR4][R6.64], R2 ;
        /*0050*/                   EXIT ;
"""


def test_the_loop_check_fires_on_a_load_or_too_few_fmas() -> None:
    with_load = LOOP.format(body="LDG.E R3, desc[UR4][R8.64] ;")
    problems = loop_problems(with_load, "k_fma", "FFMA")
    assert "LDG.E at 0x0020 in the loop" in problems
    assert any("fewer than its 16 chains" in p for p in problems)
    assert any("overhead" in p for p in loop_problems(LOOP.format(body="IADD3 R9, R9, 0x1, RZ ;"), "k_fma", "FFMA"))


def _loop(*body: str) -> str:
    """A kernel ``k_fma`` whose loop (0x10 up to its backward branch) holds ``body``."""
    lines = [f"        /*{0x10 * (i + 1):04x}*/                   {op} ;" for i, op in enumerate(body)]
    end = 0x10 * (len(body) + 1)
    return "\n" + "\n".join(["        Function : _Z5k_fmaPf", "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
                      *lines, f"        /*{end:04x}*/               @P0 BRA 0x10 ;",
                      f"        /*{end + 0x10:04x}*/                   STG.E desc[UR4][R6.64], R2 ;"])


def test_the_pipe_check_fires_on_a_loop_of_one_form() -> None:
    """16 HFMA2 with both operands broadcast from one half (the first probe's loop): FMA pipe only."""
    one_pipe = _loop(*["HFMA2 R5, R5, R19.H0_H0, R19.H1_H1"] * 16)
    assert loop_problems(one_pipe, "k_fma", "HFMA2", PIPES["simt_fp16"]) == ["no HFMA2.MMA in the loop: one pipe measured"]
    both = _loop(*["HFMA2 R5, R5, R2, R3", "HFMA2.MMA R6, R6, R2, R3"] * 8)
    assert loop_problems(both, "k_fma", "HFMA2", PIPES["simt_fp16"]) == []


def test_skipped_with_the_reason_on_a_cpu() -> None:
    peaks = measure_peaks(PeakConfig(repeats=2, compile=False), torch.device("cpu"), only=list(simt.FMAS))
    assert peaks["measurements"] == {} and peaks["errors"] == {}
    assert set(peaks["skipped"]) == set(simt.FMAS)
    assert all("no GPU" in reason for reason in peaks["skipped"].values())


def test_the_source_is_shipped_beside_the_probe() -> None:
    source = simt.LIBRARY.sources[0]
    assert source == Path(simt.__file__).with_name("simt_fma.cu") and source.exists()
    pyproject = (Path(simt.__file__).parents[2] / "pyproject.toml").read_text()
    assert re.search(r'"aisp\.peak" = \["\*\.cu"\]', pyproject)


@pytest.mark.gpu
def test_packed_fp16_outruns_fp32_on_the_gpu() -> None:
    if reason := native.unavailable():
        pytest.skip(reason)
    peaks = measure_peaks(PeakConfig(repeats=3, compile=False), torch.device("cuda", 0), only=list(simt.FMAS))
    assert peaks["errors"] == {} and peaks["skipped"] == {}
    m = peaks["measurements"]
    # both fp16 pipes in use: NVIDIA lists Hopper's non-tensor fp16 at 2x fp32 (H100 SXM 133.8 vs 66.9);
    # the one-pipe probe read 1.05x (66.2 vs 62.8 TFLOP/s on an H200)
    assert m["simt_fp16"]["value"] > 1.5 * m["simt_fp32"]["value"] > 0
    assert m["simt_fp32"]["unit"] == "TFLOP/s" and "FFMA" in m["simt_fp32"]["detail"]
    assert "HFMA2" in m["simt_fp16"]["detail"]
