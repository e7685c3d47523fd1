"""``aisp profile diff``: the ncu metrics it reads (on the H200 recording and on a hand-written
fixture in ncu's ``--csv --page raw`` format), the side-by-side table, and the CLI with a stub ncu."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import pytest
from pair_variants import variant_names
from rich.console import Console
from typer.testing import CliRunner, Result

from aisp.cli.main import app
from aisp.profile import diff
from aisp.profile.diff import columns, diff_lines, diff_table, fits, rows, totals
from aisp.profile.ncu import SECTIONS, parse_raw_csv

NCU = Path(__file__).parent / "fixtures" / "ncu"
RECORDED = NCU / "batch_size_baseline.raw.csv"  # ncu 2025.3 on an H200
BASELINE = NCU / "w4a16_gemm_baseline.raw.csv"  # hand-written in the same format, with the
OPTIMIZED = NCU / "w4a16_gemm_optimized.raw.csv"  # MemoryWorkloadAnalysis byte rates added
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN <<<(132, 1, 1), (384, 1, 1)>>>"
FUSED = "_w4a16_gemm_kernel <<<(64, 8, 1), (128, 1, 1)>>>"


def test_the_recorded_h200_report_gives_l2_and_tensor_pipe() -> None:
    kernel = next(iter(parse_raw_csv(RECORDED.read_text()).values()))
    assert kernel["l2_pct"] == 31.60 and kernel["tensor_pct"] == 0.0  # an elementwise kernel
    assert kernel["dram_gbps"] is None  # that recording predates the MemoryWorkloadAnalysis section
    assert "MemoryWorkloadAnalysis" in SECTIONS


def test_every_figure_of_a_gemm_kernel_is_read() -> None:
    gemm = parse_raw_csv(BASELINE.read_text())[GEMM]
    assert gemm["duration_us"] == pytest.approx(58.27)
    assert (gemm["sm_pct"], gemm["memory_pct"], gemm["dram_pct"], gemm["l2_pct"]) == (73.05, 52.33, 39.40, 48.81)
    assert gemm["dram_gbps"] == pytest.approx(1870.2154) and gemm["l2_gbps"] == pytest.approx(6403.118)
    assert gemm["tensor_pct"] == 71.26 and gemm["occupancy"] == 12.44
    assert [r for r, _ in gemm["top_stalls"]] == ["gmma", "barrier", "long_scoreboard"]  # "selected" is no stall
    assert list(parse_raw_csv(BASELINE.read_text() + "\n\n")) == list(parse_raw_csv(BASELINE.read_text()))


def _variants() -> dict:
    return {"baseline": {"kernels": parse_raw_csv(BASELINE.read_text())},
            "optimized": {"kernels": parse_raw_csv(OPTIMIZED.read_text())}}


def test_kernels_stand_side_by_side_variant_by_variant() -> None:
    cols = columns(_variants(), top=2)
    assert [(c.variant, c.launch.split(" <<<")[0]) for c in cols] == [
        ("baseline", "vectorized_elementwise_kernel"), ("baseline", GEMM.split(" <<<")[0]),
        ("optimized", "_w4a16_gemm_kernel")]
    table = {row[0]: row[1:] for row in rows(cols)}
    assert table["duration (µs)"] == ["39.1", "58.3", "61.5"]
    assert table["tensor pipe %"] == ["0.0", "71.3", "24.8"]
    assert table["DRAM GB/s"] == ["3,413", "1,870", "1,337"]
    assert table["top stalls (warps per issue)"][2].splitlines()[0] == "long_scoreboard 7.91"
    assert totals(_variants(), top=2) == pytest.approx({"baseline": 97.374, "optimized": 61.48})
    assert len(columns(_variants(), top=1)) == 2


def test_the_table_renders_every_row() -> None:
    console = Console(record=True, width=250)
    console.print(diff_table(_variants(), 2, "ncu: ch19:w4a16_gemm"))
    text = console.export_text()
    for label in ("SOL compute: SM %", "SOL memory %", "L2 GB/s", "achieved occupancy %", "gmma 3.41",
                  "_w4a16_gemm_kernel", "97.4"):
        assert label in text


FAKE_NCU = """#!{python}
import pathlib, sys
args = sys.argv[1:]
if "--import" in args:
    report = args[args.index("--import") + 1]
    print(pathlib.Path({base!r} if "baseline" in report else {opt!r}).read_text())
else:
    pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("report")
"""


def _diff_with_stub_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int = 250,
                        script: str = FAKE_NCU) -> Result:
    """``aisp profile diff -t ch01:batch_size --kernels 2`` with ``script`` as ncu, on a console ``width`` wide."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    fake.write_text(script.format(python=sys.executable, base=str(BASELINE), opt=str(OPTIMIZED)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=width))
    # The torch capture that names each variant's top kernels runs ch01:batch_size here, on the CPU:
    # one profiled call and no warm-up instead of 3 + 3 (the stub ncu reads a fixture whatever it is
    # told), a sixth of those calls' CPU time.
    monkeypatch.setattr(diff, "ProfileRequest", functools.partial(diff.ProfileRequest, iterations=1, warmup=0))
    return CliRunner().invoke(app, ["profile", "diff", "-t", "ch01:batch_size", "--kernels", "2",
                                    "--output-dir", str(tmp_path / "p")])


def test_cli_profile_diff_with_a_stub_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _diff_with_stub_ncu(tmp_path, monkeypatch)
    assert out.exit_code == 0, out.output
    assert "tensor pipe %" in out.output and "_w4a16_gemm_kernel" in out.output
    saved = json.loads((tmp_path / "p" / "profile_ncu.json").read_text())
    assert set(saved["variants"]) == variant_names("ch01:batch_size")


def test_cli_profile_diff_without_ncu_fails_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    out = CliRunner().invoke(app, ["profile", "diff", "-t", "ch01:batch_size", "--output-dir", str(tmp_path / "p")])
    assert out.exit_code == 1
    assert "skipped: ncu not found on PATH" in out.output and f"profiled 0 of {len(variant_names('ch01:batch_size'))} variants" in out.stderr
    assert CliRunner().invoke(app, ["profile", "diff", "-t", "ch01:no_such_pair"]).exit_code == 2


def test_a_console_too_narrow_for_the_table_gets_one_figure_a_line() -> None:
    """16 kernel columns in 80 characters left every cell one letter wide (a CI log); the line form
    keeps every figure of every kernel readable."""
    variants = _variants()
    assert fits(variants, 2, 250) and not fits(variants, 2, 80)
    text = "\n".join(diff_lines(variants, 2))
    assert "baseline: 2 kernels profiled, the top 2 97.4 µs" in text
    assert f"  {FUSED}" in text and "    tensor pipe %: 24.8" in text
    assert "    top stalls (warps per issue): long_scoreboard 7.91, " in text  # the stalls on one line
    assert max(len(line) for line in text.splitlines()) < 120


def test_cli_profile_diff_on_a_narrow_console_prints_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _diff_with_stub_ncu(tmp_path, monkeypatch, width=80)
    assert out.exit_code == 0, out.output
    assert "    DRAM GB/s: 1,337" in out.output and "┃" not in out.output


NO_KERNEL_NCU = """#!{python}
import pathlib, sys
args = sys.argv[1:]
if "--import" in args:
    print(pathlib.Path({opt!r}).read_text())
elif "baseline" in args[args.index("-o") + 1]:  # a host-only variant: ncu runs it and finds no kernel
    print("==PROF== Disconnected from process 1\\n==WARNING== No kernels were profiled.")
else:
    pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("report")
"""


def test_a_variant_that_launches_no_kernel_is_said_so_and_the_other_is_shown(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """ch05:uint8_transfer's baseline normalizes on the CPU and copies: ncu exits 0 with no report.
    That is a finding about the variant, not a failed profile ("ncu exited with 0", exit 1, before)."""
    out = _diff_with_stub_ncu(tmp_path, monkeypatch, script=NO_KERNEL_NCU)
    assert out.exit_code == 0, out.output
    assert "baseline: no kernel launched under ncu" in out.output and "_w4a16_gemm_kernel" in out.output
    saved = json.loads((tmp_path / "p" / "profile_ncu.json").read_text())
    assert saved["variants"]["baseline"]["kernels"] == {} and "error" not in saved["variants"]["baseline"]
