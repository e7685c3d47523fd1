"""The fp8 linear layers on a CPU: ``to_fp8`` replaces every linear layer, keeps a quarter of the
fp32 bytes, and the widened path computes x @ (w8 * scale)^T; under TRITON_INTERPRET=1 the kernel
path (decode rows) gives the widened path's answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ci_triton_scripts import run_scripts
from torch import nn

from aisp.kits.fp8_layers import FP8Linear, to_fp8

ROOT = Path(__file__).resolve().parents[1]


def small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 256, bias=False), nn.GELU(), nn.Sequential(nn.Linear(256, 128, bias=False)))


def test_to_fp8_replaces_every_linear_and_widens_on_a_cpu() -> None:
    model = small_model()
    w0 = model[0].weight.detach().clone()
    to_fp8(model, widen_prefill=True)
    layers = [m for m in model.modules() if isinstance(m, FP8Linear)]
    assert len(layers) == 2 and not any(isinstance(m, nn.Linear) for m in model.modules())
    first = model[0]
    assert first.weight is first.w8 and first.w8.dtype == torch.uint8 and first.scale.shape == (256,)
    assert first.w8.numel() * first.w8.element_size() == w0.numel() * w0.element_size() / 4
    dequant = first.w8.view(torch.float8_e4m3fn).float() * first.scale[:, None]
    assert ((dequant - w0).norm() / w0.norm()).item() < 0.05  # e4m3: 3 mantissa bits
    x = torch.randn(2, 5, 128)
    torch.testing.assert_close(first(x), x @ dequant.T, rtol=1e-5, atol=1e-5)


KERNEL = """
import torch
from aisp.kits.fp8_layers import FP8Linear
torch.manual_seed(0)
linear = torch.nn.Linear(256, 128, bias=False)
kernel, widened = FP8Linear(linear), FP8Linear(linear, widen_prefill=True)
x = torch.randn(3, 256)
torch.testing.assert_close(kernel(x), widened(x), rtol=2e-3, atol=2e-3)
print("kernel ok")
"""


def test_kernel_path_matches_the_widened_path_under_the_interpreter() -> None:
    pytest.importorskip("triton")
    proc = run_scripts({"kernel": KERNEL}, timeout=300)["kernel"]
    assert proc.returncode == 0 and "kernel ok" in proc.stdout, proc.stderr[-3000:]
