"""Example: your kernel under test with the ``aisp`` pytest plugin (installed with aisp; its
``aisp_check`` fixture is the harness's verifier and timer).

``my_softmax`` stands for the kernel you write (a Triton kernel's wrapper, a CUDA C++ function
loaded with ``aisp.kits.native``, a torch composition); ``reference_softmax`` for the slow, obviously
right version. The first test checks correctness over declared, edge and random sizes and two dtypes
(it runs on a CPU); the second states a speedup bar on the GPU and is skipped, with the reason,
without one.

    pytest examples/test_my_kernel.py --aisp-json aisp-checks.json
"""

from __future__ import annotations

import torch


def reference_softmax(x: torch.Tensor) -> torch.Tensor:
    """Upcast to fp32, softmax, cast back: three kernels and an fp32 copy of the input."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def my_softmax(x: torch.Tensor) -> torch.Tensor:
    """One fused kernel: reads the input once in its own dtype, accumulates in fp32 inside."""
    return torch.softmax(x, dim=-1)


def test_my_softmax_matches(aisp_check) -> None:
    result = aisp_check(my_softmax, reference_softmax, shapes="RxC", dims={"R": 64, "C": 1000},
                        dtypes=["float32", "bf16"], random=3, edges=True, time=False)
    assert result.ok


def test_my_softmax_is_faster_on_the_gpu(aisp_check) -> None:
    result = aisp_check(my_softmax, reference_softmax, shapes="RxC", dims={"R": 8192, "C": 8192},
                        dtypes=["bf16"], device="cuda")
    assert result.speedup.low >= 1.1, result.speedup
