"""Chapter 19's swept folded w4a16 variant (optimized_w4a16_gemm_swept_folded: the swept kernel with the folded
decode, the kernel w4a16_folded_swept: codes enter the mma as 128 + c, each group's -136 * sum(x) as its
first mma's C).

On a CPU (nvcc, no GPU): the library's host emulation of the instantiation against the exact product (the
tiled tests' shapes), offsets built with -128 (planted fault 3) make it fail, also with the GPU test's slack;
the sm_90 SASS streams as the swept kernel does (copies a step ahead, no loop barrier, no spills) with no
HADD2 and under 50 instructions per 512 bytes. Its GPU tests (the exact product with folded_slack, the
pair's size against the baseline, timed next to `_swept`) are tests/test_ch19_swept.py's, parametrized."""

from __future__ import annotations

import re

import pytest
import torch
from test_ch19_stream import (
    CH19,
    TILED_SHAPES,
    instructions,
    load_library,
    misses,
    needs_nvcc,
    needs_sass,
    problem,
    step_loop,
    streaming_problems,
)

from aisp.harness.loader import import_module_at

KERNEL = "w4a16_folded_swept"


def folded():
    return import_module_at(CH19 / "optimized_w4a16_gemm_swept_folded.py")


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory):
    """build(fault) -> the kernel's library for sm_90 (its host emulation runs here), each built once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.mktemp("native")))
        mod, libs = folded(), {}
        yield lambda fault=0: libs.setdefault(fault, load_library(mod, fault))


def misses_within(y: torch.Tensor, ref: torch.Tensor, slack: torch.Tensor) -> int:
    """test_ch19_stream.misses with ``slack`` added to each output's allowance."""
    err = (y.float() - ref).abs()
    return int((err > 2.0**-8 * ref.abs() + 1e-5 * float(ref.abs().max()) + slack).sum())


def folded_slack(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """What the folded kernel's fp32 sums may add on a GPU: a group's dot runs through values up to
    136 * sum|x| (the offset cancels it), and its 8 mma may each round (truncate) by an ulp of that,
    8 * 136 * 2^-23 < 2^-12 of sum|x|; scaled, per output 2^-12 * sum over k of |x_k| * scale(k)."""
    per_k = scale.float().abs().repeat_interleave(128, dim=1)  # (n, k): each weight's group scale
    return 2.0**-12 * (x.float().abs() @ per_k.t())


@needs_nvcc
@pytest.mark.parametrize("shape", TILED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_emulated_swept_folded_kernel_matches_the_exact_product(build, shape) -> None:
    """The instantiation through its own entry on swept_w4's bytes and scales, twice (the workspace zeros
    again after a call), inside the other kernels' strict bound; the offsets built with -128 (planted fault
    3: the codes' -8 never applied) fail it, also with the GPU test's slack."""
    mod = folded()
    m, n, k, sms, max_steps = shape
    x, packed, scale, ref = problem(m, n, k)
    p = mod.swept_plan(m, n, k, sms, torch.device("cpu"), max_steps)
    stored = mod.swept_w4(packed, scale)
    y = mod.folded_emulate(build(), p, x, *stored)
    assert misses(y, ref) == 0, f"{misses(y, ref)} of {y.numel()} outputs off"
    assert not p.sums.any() and not p.tickets.any(), "the workspace must be zeros again after a call"
    assert torch.equal(mod.folded_emulate(build(), p, x, *stored), y), "a second call must repeat the first"
    faulty = mod.folded_emulate(build(3), p, x, *stored)
    assert misses_within(faulty, ref, folded_slack(x, scale)) > y.numel() // 2, "the GPU test's slack must not hide it"


def without_offset_pass(ins: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The kernel's instructions less the offset pass's mma (those before its second barrier, which ends the
    pass), so that test_ch19_stream's checks find the step loop as in the other kernels."""
    bars = [i for i, (_, op, _) in enumerate(ins) if op == "BAR.SYNC.DEFER_BLOCKING"]
    return [e for i, e in enumerate(ins) if not (i < bars[1] and e[1].startswith("HMMA"))]


@needs_sass
def test_sm90_swept_folded_kernel_streams_without_hadd2_within_its_issue_budget() -> None:
    """Registers, no spills; copies a step ahead with no loop barrier (tests/test_ch19_stream.py's check);
    2 PRMT per 4 weights and no HADD2 (the -136 comes in as each group's C), no MOV building C, and under
    50 instructions per 512 bytes read (`_swept`: 526 a 4 KB step, under 72)."""
    lib = folded().LIBRARY
    usage = lib.resource_usage("90")
    [(regs, stack, local)] = re.findall(rf"Function \S*{KERNEL}\S*:\s+REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)",
                                        usage)
    assert int(regs) <= 128 and int(stack) == int(local) == 0, usage
    [body] = [part for part in lib.sass("90").split("Function : ")[1:] if KERNEL in part.split()[0]]
    ins = without_offset_pass(instructions(body))
    offset_mma = len(instructions(body)) - len(ins)
    assert offset_mma >= 8 and offset_mma % 8 == 0, "the offset pass: 8 mma a (step, half, token half)"
    assert streaming_problems(ins) == []
    loop = [op for _, op, _ in step_loop(ins)]
    assert loop.count("PRMT") == 128 and loop.count("HADD2.BF16_V2") == 0
    assert not [op for op in loop if op.startswith(("I2F", "F2F", "HMUL", "FMUL", "MOV"))]
    assert len(loop) / 8 < 50, len(loop)
