"""``aisp check`` on a GPU with the ch20 examples: the correct kernel matches and is timed with CUDA
events; the planted cheats fail with the check that names them: a cached answer, a bf16 answer,
and work left on a side stream (``unjoined-stream``, seen only by a GPU's events)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import aisp
from aisp.check import CheckOptions

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ch20"))
import kernel_check_examples as ex  # noqa: E402


def cuda() -> CheckOptions:
    return CheckOptions(device="cuda", iterations=10, warmup=3)

BIG = {"shapes": "RxC", "dims": {"R": 16384, "C": 8192}}


def test_the_correct_kernel_matches_and_is_timed_on_the_gpu() -> None:
    result = aisp.check(ex.softmax_two_pass, ex.softmax_reference, shapes="RxC", dims={"R": 64, "C": 1024},
                        dtypes=["float32", "bf16"], options=CheckOptions(device="cuda", random=2, edges=True))
    assert result.ok and result.device == "cuda", result.errors
    print(f"two_pass vs reference: {result.speedup}")


@pytest.mark.parametrize(("kernel", "check"), [
    (ex.softmax_cached, "cached-answer"),
    (ex.softmax_bf16, "precision"),
    (ex.softmax_side_stream, "unjoined-stream"),
])
def test_each_planted_cheat_fails_on_the_gpu(kernel, check: str) -> None:
    result = aisp.check(kernel, ex.softmax_reference, **BIG, options=cuda())
    assert result.verdict == "verify-failed" and result.exit_code == 4
    assert result.cases[0].check == check, result.cases[0].reason
    print(f"{kernel.__name__}: {result.cases[0].reason}")


def test_the_example_gpu_test_states_its_bar() -> None:
    """The example file's GPU bar, run directly: the fused softmax against the upcasting reference."""
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    result = aisp.check(lambda t: torch.softmax(t, -1), ex.softmax_reference, inputs=(x,), options=cuda())
    print(f"fused bf16 softmax vs upcasting reference: {result.speedup}")
    assert result.ok, result.errors
