"""Chapter 19's swept w4a16 variant (optimized_w4a16_gemm_swept: w4a16_stream.cu's loop on tile_w4's 4 KB unit
steps stored step-major, the kernel w4a16_swept).

On a CPU (nvcc, no GPU): the library's host emulation of the swept instantiation against the exact product
(the shapes of tests/test_ch19_stream.py's tiled tests), the tiled bytes fed to it instead make it fail;
swept_w4 against the format's formula written out here. tests/test_ch19_stream.py takes w4a16_swept among
its kernels for the sm_90 SASS checks (copies a step ahead, no loop barrier, no spills, its issue budget) and
the GPU checks (the exact product; at the pair's size against the baseline, printing its bandwidth)."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_ch19_stream import (
    CH19,
    TILED_SHAPES,
    load_library,
    misses,
    needs_nvcc,
    problem,
    w4,
)

from aisp.harness.loader import import_module_at


def swept():
    return import_module_at(CH19 / "optimized_w4a16_gemm_swept.py")


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory):
    """The kernel's library built once for sm_90 into a temporary cache (its host emulation runs here)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.mktemp("native")))
        yield load_library(swept())


@needs_nvcc
@pytest.mark.parametrize("shape", TILED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_emulated_swept_kernel_matches_the_exact_product(lib, shape) -> None:
    """The swept instantiation through its own entry, on swept_w4's bytes and scales, twice (the workspace
    zeros again after a call); tile_w4's bytes fed to it instead (the step order mixed up) make it fail."""
    mod = swept()
    m, n, k, sms, max_steps = shape
    x, packed, scale, ref = problem(m, n, k)
    p = mod.swept_plan(m, n, k, sms, torch.device("cpu"), max_steps)
    stored = mod.swept_w4(packed, scale)
    y = mod.swept_emulate(lib, p, x, *stored)
    assert misses(y, ref) == 0, f"{misses(y, ref)} of {y.numel()} outputs off"
    assert not p.sums.any() and not p.tickets.any(), "the workspace must be zeros again after a call"
    assert torch.equal(mod.swept_emulate(lib, p, x, *stored), y), "a second call must repeat the first"
    assert misses(mod.swept_emulate(lib, p, x, *w4().tile_w4(packed, scale)), ref) > y.numel() // 2


def test_swept_w4_puts_each_lanes_16_bytes_where_the_swept_kernel_reads_them() -> None:
    """Every 16-byte piece against w4a16_stream.cuh's swept formula, written out here independently of
    swept_w4's reshapes: unit u's global step s at (s * units + u) * 4 KB, then half, block and lane as tiled;
    the scales are tile_w4's."""
    n, k, gen = 96, 1024, torch.Generator().manual_seed(5)
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    scale = torch.randn(n, k // 128, generator=gen).bfloat16()
    sp, ss = swept().swept_w4(packed, scale)
    assert sp.shape == packed.shape and torch.equal(ss, w4().tile_w4(packed, scale)[1])
    units, steps, flat = n // 32, k // 256, sp.flatten()
    for u, s, h, b, g, t in itertools.product(range(units), range(steps), range(2), range(4), range(8), range(4)):
        at = (((s * units + u) * 2 + h) * 4 + b) * 512 + 16 * (4 * g + t)
        col = s * 128 + 64 * h + 16 * t
        assert torch.equal(flat[at:at + 16], packed[32 * u + 8 * b + g, col:col + 16]), (u, s, h, b, g, t)
    with pytest.raises(ValueError, match="multiple of 32"):
        swept().swept_w4(packed[:48], scale[:48])
