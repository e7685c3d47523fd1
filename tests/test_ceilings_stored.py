"""aisp report ceilings --stored KEY: each pair's stored best time against its ceiling as declared now."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.report.ceilings import rows, tally
from aisp.report.ceilings_stored import stored_results

PAIR = '''import torch

import aisp

WORKLOAD = aisp.Workload(bytes=4e9, precision="fp32", ceiling_note="{note}")


class Bench(aisp.Benchmark):
    workload = WORKLOAD

    def run(self) -> torch.Tensor:
        return torch.zeros(1)


def get_benchmark() -> aisp.Benchmark:
    return Bench()
'''
PEAKS = {"measurements": {"memory_copy": {"value": 4000.0}}, "latency": {}, "provenance": {"hardware_key": "h200"}}
"""4,000 GB/s: the pairs' 4 GB take 1 ms at best."""


def _chapter(root: Path, entries: dict) -> Path:
    folder = root / "ch99"
    folder.mkdir(parents=True)
    for name in ("fast", "slow", "unstored"):
        for side in ("baseline", "optimized"):
            (folder / f"{side}_{name}.py").write_text(PAIR.replace("{note}", f"{name} note"))
    (folder / "expectations_h200.json").write_text(json.dumps({"schema_version": 1, "entries": entries}))
    return root


def test_stored_best_times_are_judged_against_todays_ceilings(tmp_path: Path) -> None:
    entries = {"fast": {"baseline_ms": 4.0, "optimized_ms": 1.1, "best": "optimized_fast"},
               "slow": {"baseline_ms": 8.0, "optimized_ms": 4.0, "best": "optimized_slow"}}
    found = {r.target: r for r in rows(stored_results(_chapter(tmp_path, entries), "h200"), PEAKS)}
    assert found["ch99:fast"].percent == 100 / 1.1 and found["ch99:fast"].variant == "optimized_fast"
    assert found["ch99:slow"].percent == 25.0 and found["ch99:slow"].reason == "slow note"
    assert (found["ch99:unstored"].kind, found["ch99:unstored"].reason) == ("untimed", "no stored expectation for this hardware")
    assert tally(list(found.values()))["reached"] == 1


def test_the_cli_takes_a_run_folder_or_stored_not_both(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["report", "ceilings"], ["report", "ceilings", str(tmp_path), "--stored", "h200"]):
        out = runner.invoke(app, args)
        assert out.exit_code == 2 and "give a run folder or --stored KEY" in out.output
