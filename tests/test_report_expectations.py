"""`aisp report expectations`: every figure of the table comes from the expectation files, and
`--write-readmes` keeps a README's hand-written text while it inserts, then replaces, its block."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_cli_bench import assert_usage_error
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.judge.expectations import load
from aisp.report import expectations_table as et

runner = CliRunner()
SPEEDUPS = (1.4, 1.5, 1.62)
HAND_WRITTEN = "# Chapter 1\n\nHand-written text, measured 1.7x on an older harness.\n"


def _run(date: str, commit: str | None, speedup: float, **extra) -> dict:
    return {"date": date, "commit": commit, "speedup": speedup, "best": "optimized_fuse_tf32",
            "baseline_ms": 3.0, "optimized_ms": 3.0 / speedup, **extra}


def _entry(history: list[dict], headline: str = "time", **extra) -> dict:
    latest = history[-1]
    return {"baseline_ms": latest["baseline_ms"], "optimized_ms": latest["optimized_ms"],
            "speedup": {"value": latest["speedup"], "low": latest["speedup"] - 0.05, "high": latest["speedup"] + 0.05},
            "headline": headline, "best": latest["best"],
            "environment": {"gpu_name": "NVIDIA H200", "gpu_count": 1},
            "provenance": {"date": latest["date"], "commit": latest["commit"], "dirty": False},
            "history": history, **extra}


def _write(path: Path, entries: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hardware_key": path.stem.removeprefix("expectations_"), "entries": entries}))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """ch01: a three-run time entry, a memory entry and a metric entry on one H200; ch02: a two-GPU entry on a
    four-GPU host; ch03: a chapter with no stored expectations."""
    fuse = _entry([_run("2026-11-22T01:00:00", None, SPEEDUPS[0]),
                   _run("2026-11-23T02:00:00", "aaaaaaa1111", SPEEDUPS[1], diff_sha256="f00"),
                   _run("2026-11-28T03:00:00", "bbbbbbb2222", SPEEDUPS[2])])
    memory = _entry([_run("2026-11-28T03:00:00", "bbbbbbb2222", 2.0)], headline="memory",
                    memory={"baseline_peak_bytes": 4 * 2**30, "optimized_peak_bytes": 2 * 2**30})
    decode = _entry([_run("2026-11-28T03:00:00", "bbbbbbb2222", 3.0)], headline="metric:decode_gap_p99_ms")
    _write(tmp_path / "ch01" / "expectations_h200.json", {"fuse": fuse, "checkpoint": memory, "decode": decode})
    (tmp_path / "ch01" / "README.md").write_text(HAND_WRITTEN)
    two = _entry([_run("2026-11-28T03:00:00", "ccccccc3333", 1.3)])
    two["environment"] = {"gpu_name": "NVIDIA H200", "gpu_count": 2, "host_gpu_count": 4}
    _write(tmp_path / "ch02" / "expectations_2x_h200_host4.json", {"allreduce_multigpu": two})
    (tmp_path / "ch02" / "README.md").write_text("# Chapter 2\n")
    (tmp_path / "ch03").mkdir()
    (tmp_path / "ch03" / "README.md").write_text("# Chapter 3\n")
    return tmp_path


def _rows(root: Path, chapter: str) -> dict[str, et.Row]:
    stored = {path: load(path)["entries"] for path in et.chapter_files(root, [chapter])[chapter]}
    return {r.pair: r for r in et.chapter_rows(stored)}


def test_the_rows_figures_come_from_the_files(root):
    fuse = _rows(root, "ch01")["fuse"]
    assert fuse.speedup == f"{SPEEDUPS[2]:.2f}x [{SPEEDUPS[2] - 0.05:.2f}, {SPEEDUPS[2] + 0.05:.2f}]"
    assert fuse.runs == len(SPEEDUPS)
    assert fuse.spread == f"{min(SPEEDUPS):.2f}-{max(SPEEDUPS):.2f}x"
    assert fuse.geomean == f"{math.prod(SPEEDUPS) ** (1 / len(SPEEDUPS)):.2f}x"
    assert (fuse.key, fuse.best) == ("h200", "tf32")
    assert (fuse.baseline, fuse.optimized) == ("3.000 ms", f"{3.0 / SPEEDUPS[2]:#.4g} ms")


def test_a_pending_run_is_shown_beside_the_runs(root):
    stored = {"fuse": _entry([_run("2026-11-28T03:00:00", "b", 3.3)] * 3, pending=_run("2026-11-28T04:00:00", "b", 6.99))}
    row = et.chapter_rows({root / "ch09" / "expectations_h200.json": stored})[0]
    assert row.runs == 3 and et.cells(row)[6] == "3 (+1 pending at 6.99x)"
    assert et.cells(_rows(root, "ch01")["fuse"])[6] == "3"


def test_dates_and_commits_of_the_runs(root):
    fuse = _rows(root, "ch01")["fuse"]
    assert fuse.dates == "2026-11-22 to 11-28"
    assert fuse.commits == "aaaaaaa+dirty, bbbbbbb, 1 unrecorded"


def test_a_memory_headline_shows_the_peaks_and_names_the_headline(root):
    row = _rows(root, "ch01")["checkpoint"]
    assert (row.baseline, row.optimized) == ("4.00 GiB", "2.00 GiB")
    assert row.speedup.endswith("(memory)") and row.runs == 1


def test_a_metric_headline_keeps_the_times_and_names_the_metric(root):
    row = _rows(root, "ch01")["decode"]
    assert row.speedup.endswith("(decode_gap_p99_ms)") and row.baseline == "3.000 ms"


def test_markdown_lists_each_chapter_and_tallies_few_runs(root):
    result = runner.invoke(app, ["report", "expectations", "--root", str(root), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "## ch01" in result.output and "## ch03\n\n(no stored expectations)" in result.output
    assert "| allreduce_multigpu | 2x_h200_host4 |" in result.output
    assert "4 entries in 2 chapters; 3 with fewer than 3 runs" in result.output


def test_key_and_chapter_select_rows(root):
    result = runner.invoke(app, ["report", "expectations", "--root", str(root), "-c", "ch1", "-k", "h200",
                                 "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| fuse | h200 |" in result.output and "ch02" not in result.output


def test_the_console_table_holds_the_rows(root):
    result = runner.invoke(app, ["report", "expectations", "--root", str(root)], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "ch01: stored expectations" in result.output and "1.40-1.62x" in result.output


def test_readme_block_is_appended_then_replaced_and_hand_text_kept(root):
    readme = root / "ch01" / "README.md"
    assert runner.invoke(app, ["report", "expectations", "--root", str(root), "--write-readmes"]).exit_code == 0
    text = readme.read_text()
    assert text.startswith(HAND_WRITTEN) and f"\n{et.HEADING}\n\n{et.START}\n" in text
    assert "`expectations_h200.json` (1 x NVIDIA H200)" in text and "| fuse | h200 |" in text
    edited = text + "\nMore hand-written text after the block.\n"
    readme.write_text(edited)
    later = _entry([_run("2026-11-29T00:00:00", "ddddddd4444", 1.8)])
    _write(root / "ch01" / "expectations_h200.json", {"fuse": later})
    assert runner.invoke(app, ["report", "expectations", "--root", str(root), "--write-readmes"]).exit_code == 0
    head, rest = readme.read_text().split(et.START)
    block, tail = rest.split(et.END)
    assert head == edited.split(et.START)[0] and tail == edited.split(et.END)[1]
    assert "1.80x" in block and "checkpoint" not in block and block.count(et.HEADING) == 0


def test_write_readmes_twice_changes_nothing(root):
    first = runner.invoke(app, ["report", "expectations", "--root", str(root), "--write-readmes"])
    texts = {p: p.read_text() for p in root.glob("ch*/README.md")}
    second = runner.invoke(app, ["report", "expectations", "--root", str(root), "--write-readmes"])
    assert first.exit_code == second.exit_code == 0
    assert {p: p.read_text() for p in texts} == texts
    assert "Wrote" in first.output and "Wrote" not in second.output and "Unchanged:" in second.output
    assert texts[root / "ch03" / "README.md"] == "# Chapter 3\n"
    assert "`expectations_2x_h200_host4.json` (2 x NVIDIA H200 of a 4-GPU host)" in texts[root / "ch02" / "README.md"]
    assert "ratio of peak memory" in texts[root / "ch01" / "README.md"]
    assert "or of the metric named" in texts[root / "ch01" / "README.md"]
    assert "in brackets" not in texts[root / "ch02" / "README.md"]


def _break_json(root: Path) -> None:
    (root / "ch01" / "expectations_h200.json").write_text("{not json")


def _no_entries(root: Path) -> None:
    (root / "ch01" / "expectations_h200.json").write_text(json.dumps({"entries": []}))


def _lost_end_marker(root: Path) -> None:
    (root / "ch02" / "README.md").write_text(f"# Chapter 2\n{et.START}\nold table\n")


def _markers_reversed(root: Path) -> None:
    (root / "ch02" / "README.md").write_text(f"# Chapter 2\n{et.END}\nold table\n{et.START}\n")


@pytest.mark.parametrize(("args", "damage", "words"), [
    (["-c", "ch99"], None, ["unknown chapter ch99"]),
    (["--root", "{root}/nowhere"], None, ["no such folder"]),
    (["-k", "h100"], None, ["expectations_h100.json", "h200, 2x_h200_host4"]),
    ([], _break_json, ["expectations_h200.json", "malformed JSON"]),
    ([], _no_entries, ["expectations_h200.json", "no 'entries'"]),
    (["--write-readmes"], _lost_end_marker, ["README.md", "1 start and 0 end markers"]),
    (["--write-readmes"], _markers_reversed, ["README.md", "in order"]),
    (["--write-readmes", "-k", "h200"], None, ["leave out --key"]),
])
def test_bad_input_is_one_line_and_exit_2(root, args, damage, words):
    if damage:
        damage(root)
    before = {p: p.read_text() for p in root.glob("ch*/README.md")}
    result = runner.invoke(app, ["report", "expectations", "--root", str(root),
                                 *(a.format(root=root) for a in args)])
    assert_usage_error(result, *words)
    assert {p: p.read_text() for p in before} == before
