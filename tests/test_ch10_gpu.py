"""Chapter 10's GEMM ladder on a GPU: every rung equals torch.matmul on small shapes that exercise
the edges (M != N, a K ring that wraps, fewer K slices than stages) and on the pairs' 8192^3 GEMM,
a bad shape is refused, and the ladder's TFLOP/s are reported beside torch.matmul (cuBLAS) on
the same GEMM: reported, not asserted (the harness and expectations judge times)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH10 = Path(__file__).resolve().parents[1] / "ch10"
COMMON = import_module_at(CH10 / "ch10_common.py")
pytestmark = pytest.mark.gpu
SHAPES = [(384, 512, 320), (256, 256, 128), (8192, 8192, 8192)]
"""(M, N, K): 3 x 2 tiles of 128 x 256 with 5 K slices of 64 (the 4-stage ring wraps); 2 slices,
fewer than the stages; the pairs' GEMM. Every rung's tiles divide them."""


def gemm_lib(kernel: str):
    if reason := native.unavailable(hopper_only=kernel in COMMON.HOPPER_ONLY):
        pytest.skip(reason)
    return COMMON.load_gemm(kernel, torch.device("cuda"))


def operands(m: int, n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    return a, b, torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", list(COMMON.KERNELS))
def test_rung_equals_torch_matmul(kernel: str, shape: tuple[int, int, int]) -> None:
    lib = gemm_lib(kernel)
    a, b, c = operands(*shape)
    COMMON.check_against_torch(COMMON.run_gemm(lib, a, b, c), a, b, kernel)
    torch.cuda.synchronize()


@pytest.mark.parametrize("kernel", list(COMMON.KERNELS))
def test_rung_refuses_a_shape_its_tiles_do_not_divide(kernel: str) -> None:
    lib = gemm_lib(kernel)
    a, b, c = operands(200, 256, 128)
    with pytest.raises(RuntimeError, match="status -1"):
        COMMON.run_gemm(lib, a, b, c)


def test_ladder_tflops_beside_cublas(capsys: pytest.CaptureFixture[str]) -> None:
    if reason := native.unavailable():
        pytest.skip(reason)
    tool = import_module_at(CH10 / "gemm_ladder.py")
    rungs = tool.measure(8192, 10, torch.device("cuda"))
    assert rungs[-1].name == "cublas" and len(rungs) >= 3
    with capsys.disabled():
        print("\n" + "\n".join(tool.table(rungs, 2.0 * 8192**3, None)))
