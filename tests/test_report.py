"""`aisp report roofline` and `aisp report html` on a synthetic run folder."""

from __future__ import annotations

import base64
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aisp.cli.main import app

PNG = b"\x89PNG\r\n\x1a\n"
PEAKS = {
    "schema_version": 1,
    "provenance": {"hardware_key": "testhw"},
    "measurements": {"matmul_fp32": {"value": 50.0, "unit": "TFLOP/s", "detail": ""},
                     "matmul_bf16": {"value": 800.0, "unit": "TFLOP/s", "detail": ""},
                     "memory_copy": {"value": 4000.0, "unit": "GB/s", "detail": ""}},
    "skipped": {}, "errors": {},
}


def _variant(name: str, median: float, speedup: dict | None = None) -> dict:
    summary = {"n": 20, "median": median, "mean": median, "std": 0.01, "p10": median * 0.98,
               "p90": median * 1.02, "min": median * 0.97, "max": median * 1.05, "cv": 0.01}
    out = {"name": name, "file": f"{name}.py", "summary": summary, "samples_ms": [median] * 20,
           "throughput": {}, "memory": {"peak_bytes": 1 << 20}, "metrics": {}}
    return out | ({"speedup": speedup} if speedup else {})


def _pair(group: str, name: str, workload: dict, base_ms: float | None, opt_ms: float | None,
          verdict: str) -> dict:
    speedup = {"value": base_ms / opt_ms, "low": base_ms / opt_ms * 0.95,
               "high": base_ms / opt_ms * 1.05} if base_ms and opt_ms else None
    variants = [_variant(f"optimized_{name}", opt_ms, speedup)] if opt_ms else []
    return {"target": f"{group}:{name}", "group": group, "name": name, "verdict": verdict,
            "reason": None if base_ms else "needs a CUDA GPU",
            "workload": {"items": 0, "item_unit": "items", "headline": "time", **workload},
            "baseline": _variant(f"baseline_{name}", base_ms) if base_ms else None,
            "variants": variants, "best": variants[0]["name"] if variants else None, "speedup": speedup}


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of four pairs: two on the roofline, one pure data movement, one skipped."""
    results = [
        _pair("ch01", "batch_size", {"flops": 1e12, "bytes": 1e9, "precision": "bf16"}, 4.0, 2.0, "ok"),
        _pair("ch09", "fusion", {"flops": 1e9, "bytes": 1e9, "precision": None}, 2.0, 1.0, "ok"),
        _pair("ch02", "pinned_memory", {"flops": 0, "bytes": 2e9, "precision": None}, 2.0, 2.5, "slower"),
        _pair("ch10", "tma", {"flops": 1e12, "bytes": 1e9, "precision": "bf16"}, None, None, "skipped"),
    ]
    run = tmp_path / "artifacts" / "20260101-000000"
    run.mkdir(parents=True)
    summary = {"schema_version": 1, "run_id": run.name, "hardware_key": "testhw", "results": results}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "gpu_name": "Test GPU <X>",
                                                   "torch": "2.11", "driver": "580.1"}))
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    monkeypatch.setenv("AISP_ROOT", str(tmp_path))
    return run


def _write_peaks(run_dir: Path) -> None:
    folder = run_dir.parent.parent / "peaks"
    folder.mkdir(exist_ok=True)
    (folder / "peak_testhw.json").write_text(json.dumps(PEAKS))


def test_roofline_png_plots_the_pairs_with_flops_and_bytes(run_dir: Path) -> None:
    _write_peaks(run_dir)
    result = CliRunner().invoke(app, ["report", "roofline", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "(2 pairs)" in result.output
    assert (run_dir / "roofline.png").read_bytes()[:8] == PNG


def test_roofline_output_option(run_dir: Path, tmp_path: Path) -> None:
    _write_peaks(run_dir)
    out = tmp_path / "plots" / "r.png"
    assert CliRunner().invoke(app, ["report", "roofline", str(run_dir), "-o", str(out)]).exit_code == 0
    assert out.read_bytes()[:8] == PNG


def test_roofline_without_peaks_says_how_to_get_them(run_dir: Path) -> None:
    result = CliRunner().invoke(app, ["report", "roofline", str(run_dir)])
    assert result.exit_code == 2
    assert "aisp peak" in result.output
    assert not (run_dir / "roofline.png").exists()


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.cells: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        elif tag not in ("meta",):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open.pop() == tag, f"unbalanced </{tag}>"

    def handle_data(self, data: str) -> None:
        if self.open and self.open[-1] == "td":
            self.cells.append(data)


def _parse(path: Path) -> _Collector:
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    parser = _Collector()
    parser.feed(text)
    assert parser.open == []
    return parser


def test_html_is_self_contained_with_table_speedups_and_roofline(run_dir: Path) -> None:
    _write_peaks(run_dir)
    result = CliRunner().invoke(app, ["report", "html", str(run_dir)])
    assert result.exit_code == 0, result.output
    page = _parse(run_dir / "report.html")
    for target in ("ch01:batch_size", "ch09:fusion", "ch02:pinned_memory", "ch10:tma"):
        assert target in page.cells
    assert {"ok", "slower", "skipped"} <= set(page.cells)
    assert "2.00x [1.90, 2.10]" in page.cells
    assert {"62% (compute)", "25% (memory)", "20% (memory)"} <= set(page.cells)
    assert len(page.images) == 2
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG
    assert "Test GPU &lt;X&gt;" in (run_dir / "report.html").read_text()
    assert not re.search(r"(src|href)=\"(?!data:)", (run_dir / "report.html").read_text())


def test_html_without_peaks_explains_the_missing_roofline(run_dir: Path) -> None:
    out = run_dir / "other.html"
    assert CliRunner().invoke(app, ["report", "html", str(run_dir), "--output", str(out)]).exit_code == 0
    page = _parse(out)
    assert len(page.images) == 1
    assert "run 'aisp peak'" in html.unescape(out.read_text())
