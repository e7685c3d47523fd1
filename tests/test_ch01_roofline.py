"""ch01/roofline_analysis.py: classification against the ceilings, and the whole report on a CPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

CH01 = Path(__file__).resolve().parents[1] / "ch01"
sys.path.insert(0, str(CH01))
import roofline_analysis as ra  # noqa: E402

PEAKS: dict[str, Any] = {
    "measurements": {"matmul_fp32": {"value": 50.0}, "matmul_bf16": {"value": 800.0},
                     "memory_copy": {"value": 4000.0}},
    "provenance": {"hardware_key": "test"}, "source": "test",
}


def kernel(flops: float, nbytes: float, precision: str = "fp32") -> ra.Kernel:
    return ra.Kernel("k", flops, nbytes, precision, lambda: None)


def test_low_intensity_is_memory_bound() -> None:
    lines = ra.describe(kernel(1.0, 12.0), 0.3, PEAKS)
    assert "Memory-bound" in lines[-1]
    # Roof at AI 1/12: 4000 GB/s / 12 = 0.333 TFLOP/s; 0.3 achieved is 90% of it.
    assert "90% of its roof" in lines[2]


def test_high_intensity_is_compute_bound() -> None:
    lines = ra.describe(kernel(2000.0, 1.0, "bf16"), 600.0, PEAKS)
    assert "Compute-bound" in lines[-1]
    assert "75% of its roof" in lines[2]


def test_ridge_point_separates_the_two() -> None:
    ridge = 50.0 * 1e3 / 4000.0
    assert "Memory-bound" in ra.describe(kernel(ridge * 0.9, 1.0), 1.0, PEAKS)[-1]
    assert "Compute-bound" in ra.describe(kernel(ridge * 1.1, 1.0), 1.0, PEAKS)[-1]


def test_report_and_plot_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ra, "ceilings", lambda device, precisions: PEAKS)
    out = tmp_path / "roofline.png"
    assert ra.main(["--device", "cpu", "--vector-n", "100000", "--matmul-n", "64", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for line in ("Vector Add:", "Matrix Multiply:", "AI: 0.0833 FLOP/Byte", "Memory-bound",
                 f"Roofline plot saved to {out}"):
        assert line in text
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_kernels_declare_their_accounting() -> None:
    add = ra.vector_add(1000, torch.device("cpu"))
    assert (add.flops, add.bytes) == (1000, 12000)
    mm = ra.matrix_multiply(64, torch.device("cpu"))
    assert mm.flops == 2 * 64**3 and mm.bytes == 3 * 64 * 64 * 4
