"""ch14/compile_report.py on a CPU: the demo's deliberate graph break, its recompile on a new
sequence length, and Inductor's kernels are found; a model without a break reports none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from aisp.harness.loader import import_module_at

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="Inductor on a CPU needs a C++ compiler")
CH14 = Path(__file__).resolve().parents[1] / "ch14"


def tool():
    return import_module_at(CH14 / "compile_report.py")


def test_demo_reports_its_break_recompile_and_kernels() -> None:
    cr = tool()
    rep = cr.report(cr.DemoModel(), cr.demo_calls(torch.device("cpu")))
    assert (rep.graphs, rep.graph_breaks) == (2, 1)
    assert "item()" in rep.break_reasons[0]
    assert rep.recompiles >= 1 and any("size mismatch" in g for g in rep.guard_failures)
    assert rep.kernels_generated >= len(rep.kernel_names) > 0
    assert all(k.startswith("cpp_fused") for k in rep.kernel_names)
    table = rep.table()
    assert "| graph breaks" in table and rep.kernel_names[0] in table


def test_a_clean_model_has_one_graph_and_no_recompile() -> None:
    cr = tool()
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
    rep = cr.report(model, [(torch.randn(8, 16),), (torch.randn(8, 16),)])
    assert (rep.graphs, rep.graph_breaks, rep.recompiles) == (1, 0, 0)
    assert rep.break_reasons == () and rep.guard_failures == ()


def test_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert tool().main(["--device", "cpu"]) == 0
    assert "| recompiles" in capsys.readouterr().out
