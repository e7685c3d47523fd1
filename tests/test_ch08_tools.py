"""Chapter 8's Triton matmul under TRITON_INTERPRET=1 on a CPU (every autotune candidate and the
fixed config, with edges that are not tile multiples), its config space, and the occupancy sweep's
table and plot on recorded figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from ci_triton_scripts import run_scripts

from aisp.harness.loader import import_module_at

CH08 = Path(__file__).resolve().parents[1] / "ch08"
INTERPRET = """
import torch
import ch08_triton as t
torch.manual_seed(0)
for dtype in (torch.float16, torch.float32):
    a, b = torch.randn(150, 100).to(dtype), torch.randn(100, 90).to(dtype)
    want = a.double() @ b.double()
    configs = [dict(t.FIXED)] + [c.all_kwargs() for c in t.CONFIGS]
    for config in configs:
        c = torch.full((150, 90), float("nan"), dtype=dtype)
        t.launch(t.matmul_kernel, a, b, c, **config)
        err = float((c.double() - want).norm() / want.norm())
        assert err < (2e-3 if dtype == torch.float16 else 1e-6), (dtype, config, err)
print("ok", len(configs))
"""


def test_triton_matmul_matches_torch_in_the_interpreter() -> None:
    pytest.importorskip("triton")
    proc = run_scripts({"interpret": INTERPRET}, path=(str(CH08),), timeout=900)["interpret"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok 9" in proc.stdout


def test_autotune_space_holds_the_fixed_config_and_fits_shared_memory() -> None:
    pytest.importorskip("triton")
    t = import_module_at(CH08 / "ch08_triton.py")
    fixed = tuple(t.FIXED[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    assert fixed in t.TUNE_SPACE and len(set(t.TUNE_SPACE)) == len(t.TUNE_SPACE)
    for m, n, k, _, stages in t.TUNE_SPACE:
        assert (m * k + k * n) * 2 * stages <= 227 * 1024, (m, n, k, stages)


def sweep():
    return import_module_at(CH08 / "occupancy_sweep.py")


def recorded():
    """Points of the shape a sweep produces (test inputs, not measurements)."""
    r = sweep().Record
    return [r(256, 1, 16, 0, 8, 1.0, 2600.0), r(256, 4, 32, 0, 8, 1.0, 3800.0),
            r(256, 4, 32, 96, 2, 0.25, 2100.0), r(1024, 8, 72, 96, 0, 0.0, 0.0)]


def test_sweep_rows_sort_by_bandwidth_and_show_share_of_peak() -> None:
    rows = sweep().rows(recorded(), peak_gbps=4000.0)
    assert [row[6] for row in rows] == ["3,800", "2,600", "2,100", "does not fit"]
    assert rows[0] == ("256", "4", "32", "0", "8", "100%", "3,800", "95%")
    assert rows[2][5] == "25%" and rows[2][7] == "52%" and rows[3][7] == "-"
    assert all(row[7] == "-" for row in sweep().rows(recorded(), peak_gbps=None))


def test_sweep_table_has_a_row_per_point() -> None:
    table = sweep().table(recorded(), peak_gbps=4000.0)
    assert table.row_count == 4 and len(table.columns) == 8


def test_sweep_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep" / "occupancy.png"
    sweep().plot(recorded(), 4000.0, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_without_a_gpu_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    assert sweep().main(["--out", "unused.png"]) == 0
    assert "skipped" in capsys.readouterr().out
