"""Chapter 20's tools on a CPU. kernel_check.py: a correct kernel passes at the harness's tolerance,
a kernel with a tile-tail bug passes its aligned shape and fails random ones, a kernel that raises
is reported, every bad input is one line on stderr with exit 2, and --help describes every option. stages_chart.py: a recorded
run's stages come out in order with cumulative and step-over-step speedups, the newest run of the
chapter is found, a missing one is an error, and the chart is written."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at

CH20 = Path(__file__).resolve().parents[1] / "ch20"
EX = "kernel_check_examples"


@pytest.fixture(scope="module")
def kc():
    sys.path.insert(0, str(CH20))
    yield import_module_at(CH20 / "kernel_check.py")
    sys.path.remove(str(CH20))


def check(kc, capsys, kernel: str, *extra: str) -> tuple[int, str, str]:
    code = kc.main([f"{EX}:{kernel}", "--reference", f"{EX}:softmax_reference", "--iterations", "3", "--warmup", "1",
                    *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_correct_kernel_passes_over_random_shapes_and_dtypes(kc, capsys) -> None:
    code, out, err = check(kc, capsys, "softmax_two_pass", "--shapes", "RxC", "--dims", "R=16", "C=256", "--random", "3",
                           "--dtypes", "float32", "bf16")
    assert code == 0 and not err
    lines = [line for line in out.splitlines() if " ok " in f" {line} "]
    assert len(lines) == 8 and all("speedup" not in line and "x [" in line for line in lines)  # timed
    assert out.splitlines()[-1].startswith("all cases match")


def test_a_tile_tail_bug_passes_aligned_and_fails_random_shapes(kc, capsys) -> None:
    code, out, _ = check(kc, capsys, "softmax_tail_bug", "--shapes", "16x256", "--no-time")
    assert code == 0
    code, out, _ = check(kc, capsys, "softmax_tail_bug", "--shapes", "RxC", "--dims", "R=16", "C=256", "--random", "3",
                         "--no-time")
    assert code == 4
    assert out.splitlines()[0].startswith("16x256") and " ok " in out.splitlines()[0]
    assert sum("FAIL" in line and "outside tolerance" in line for line in out.splitlines()) >= 2


def test_a_kernel_that_raises_is_reported(kc, capsys) -> None:
    code, out, _ = check(kc, capsys, "softmax_raises", "--shapes", "4x4")
    assert code == 5 and "ERROR kernel raised RuntimeError: invalid configuration argument" in out


def test_a_module_path_works(kc, capsys) -> None:
    code = kc.main([str(CH20 / f"{EX}.py") + ":softmax_two_pass", "--reference", f"{EX}:softmax_reference",
                    "--shapes", "4x8", "--no-time"])
    assert code == 0 and "all cases match" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["nomodule_xyz:f", "--reference", f"{EX}:softmax_reference", "--shapes", "4"], "cannot import 'nomodule_xyz'"),
    ([f"{EX}:nope", "--reference", f"{EX}:softmax_reference", "--shapes", "4"], f"'{EX}' has no function 'nope'"),
    ([f"{EX}:softmax_two_pass", "--reference", "softmax_reference", "--shapes", "4"], "is not MODULE:FUNCTION"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "4x-4"], "bad shape '4x-4'"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "4,,4"], "bad shape"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "MxK"], "does not bind"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "M", "--dims", "M=0"], "bad --dims"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "4", "--dtypes", "int4"], "unknown dtype"),
    ([f"{EX}:softmax_two_pass", "--shapes", "4"], "required: --reference"),
    ([f"{EX}:softmax_two_pass", "--reference", f"{EX}:softmax_reference", "--shapes", "4", "--iterations", "1"], "iterations >= 2"),
    (["missing.py:f", "--reference", f"{EX}:softmax_reference", "--shapes", "4"], "no file 'missing.py'"),
])
def test_bad_input_is_one_line_and_exit_2(kc, capsys, args: list[str], message: str) -> None:
    assert kc.main(args) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1
    assert out.err.startswith("kernel_check: ") and message in out.err


def test_every_option_is_described_in_help(kc, capsys) -> None:
    with pytest.raises(SystemExit):
        kc.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--reference", "--shapes", "--dims", "--random", "--edges", "--dtypes", "--device", "--precision",
                   "--element-tol", "--rtol", "--seed", "--iterations", "--warmup", "--no-time", "--json"):
        assert option in out
    assert "N more cases per spec, each name drawn in 1..its value" in out
    assert "Exit: 0 every case matches; 4 a case does not match" in out


def variant(name: str, ms: float, speedup: float | None, **extra: object) -> dict:
    return {"name": name, "verdict": "ok", "summary": {"median": ms},
            "speedup": {"value": speedup, "low": speedup * 0.95, "high": speedup * 1.05} if speedup else None,
            "throughput": {"items_per_s": 1000.0 / ms}, **extra}


def write_run(root: Path, stamp: str, group: str = "ch20") -> Path:
    result = {"target": f"{group}:demo_e2e", "group": group, "name": "demo_e2e", "verdict": "ok",
              "baseline": variant("baseline_demo_e2e", 100.0, None),
              "variants": [variant("optimized_demo_e2e_s2_graph", 10.0, 10.0, metrics={"mfu": 0.41}),
                           variant("optimized_demo_e2e_s1_cache", 25.0, 4.0)]}
    run = root / stamp
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"schema_version": 1, "results": [result]}))
    (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "gpu_name": "NVIDIA H200"}))
    return run


@pytest.fixture(scope="module")
def chart():
    return import_module_at(CH20 / "stages_chart.py")


def test_stages_table_is_cumulative_and_in_order(chart, tmp_path: Path, capsys) -> None:
    write_run(tmp_path, "20260101-000000")
    newest = write_run(tmp_path, "20260102-000000")
    write_run(tmp_path, "20260103-000000", group="ch16")
    assert chart.newest_run(tmp_path, "ch20") == newest
    assert chart.main(["--artifacts-dir", str(tmp_path), "--png", str(tmp_path / "stages.png")]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "20260102-000000" in out
    rows = [line for line in out.splitlines() if re.match(r"\| (baseline|s\d) ", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["baseline", "s1 cache", "s2 graph"]
    assert "4.00x [3.80, 4.20]" in rows[1] and "| 4.00x |" in rows[1]  # vs baseline, vs previous
    assert "10.00x" in rows[2] and "| 2.50x |" in rows[2] and "mfu 0.41" in rows[2]
    assert (tmp_path / "stages.png").stat().st_size > 1000


def test_no_run_of_the_chapter_is_exit_2(chart, tmp_path: Path, capsys) -> None:
    write_run(tmp_path, "20260103-000000", group="ch16")
    assert chart.main(["--artifacts-dir", str(tmp_path)]) == 2
    assert "no run of ch20" in capsys.readouterr().err
