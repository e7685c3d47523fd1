"""Chapter 19 tools on a CPU: the loss curves of bf16 and fp8 training stay together and fall, the
table reports the gaps, and row-wise scales recover the accuracy per-tensor scales lose to outliers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_ch19_pairs import load


def test_fp8_loss_curves_track_bf16_and_fall() -> None:
    tool = load("precision_curves")
    cfg = tool.CurveConfig(steps=12, tokens=64, dim=64, layers=1, lr=3e-3)
    curves = {m: tool.train(cfg, m, torch.device("cpu")) for m in tool.MODES}
    for mode, losses in curves.items():
        assert losses[-1] < 0.8 * losses[0], f"{mode} did not learn: {losses}"
        assert abs(losses[-1] - curves["bf16"][-1]) < 0.03 * curves["bf16"][-1], mode
    assert curves["fp8-dynamic"] != curves["bf16"], "fp8 mode ran in bf16"


def test_curve_table_reports_each_gap_and_the_last_step(tmp_path: Path) -> None:
    tool = load("precision_curves")
    curves = {"bf16": [2.0, 1.0, 0.5], "fp8-dynamic": [2.0, 1.1, 0.5], "fp8-delayed": [2.0, 1.0, 0.55]}
    rows = tool.table(curves, every=2).splitlines()
    assert [r.split()[0] for r in rows[1:]] == ["1", "3"]
    assert rows[-1].split()[-2:] == ["+0.00%", "+10.00%"]
    pytest.importorskip("matplotlib")
    tool.plot(curves, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_rowwise_scales_recover_what_outliers_cost_per_tensor() -> None:
    rows = {(r["case"], r["scaling"]): r for r in load("rowwise_scaling").report(128, torch.device("cpu"))}
    assert rows[("1% rows x1e5", "per-tensor")]["rel_l2"] > 3 * rows[("1% rows x1e5", "row-wise")]["rel_l2"]
    assert rows[("gaussian", "row-wise")]["rel_l2"] < 0.06
    assert all(r["ms"] is None for r in rows.values())
