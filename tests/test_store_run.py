"""``aisp bench store RUN_DIR``: a finished run (a merged run of shards, or one from another machine)
stored in the expectation files beside this checkout's pairs, as --update-expectations would have."""

from __future__ import annotations

import json
import os

from conftest import good_pair_folder
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness import host
from aisp.harness.discovery import pairs_in
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite

runner = CliRunner()


def test_a_run_from_another_machine_is_stored_beside_this_checkouts_pair(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a loaded CI host reads busy: not stored
    monkeypatch.setattr(host, "PROC_STAT", tmp_path / "no_proc_stat")  # nor a VM's steal
    monkeypatch.setattr(host, "STARVED_LIMIT", float("inf"))  # nor its threads waiting for a CPU (0.46 s against 0.15 once)
    mine = good_pair_folder(tmp_path)
    options = RunOptions(device="cpu", iterations=3, warmup=1, warmup_s=0, artifacts_dir=tmp_path / "runs")
    (result,), run_dir = run_suite(pairs_in(mine), options)
    assert not (mine / "expectations_cpu.json").exists()  # run_suite alone stores nothing
    summary = json.loads((run_dir / "summary.json").read_text())
    for each in summary["results"]:  # as written on another machine: its paths, not ours
        each["files"] = [f"/elsewhere/mine/{name}" for name in ("baseline_good.py", "optimized_good.py")]
    summary["results"].append({**summary["results"][0], "target": "mine:gone", "name": "gone"})
    (run_dir / "summary.json").write_text(json.dumps(summary))

    assert not result["host"]["busy"], result["host"]
    out = runner.invoke(app, ["bench", "store", str(run_dir), "--root", str(mine)])
    assert out.exit_code == 0, out.output
    stored = json.loads((mine / "expectations_cpu.json").read_text())["entries"]
    assert set(stored) == {"good"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert stored["good"]["provenance"]["commit"] == manifest.get("git_commit")
    assert stored["good"]["speedup"]["value"] == result["speedup"]["value"]
    assert "mine:gone: no such pair in this checkout; not stored" in out.output

    assert stored["good"]["history"][-1]["run"] == run_dir.name and stored["good"]["link"] == "hbm"
    again = runner.invoke(app, ["bench", "store", str(run_dir), "--root", str(mine)])  # the same run twice
    assert again.exit_code == 0 and "Expectations updated" not in again.output
    assert len(json.loads((mine / "expectations_cpu.json").read_text())["entries"]["good"]["history"]) == 1


def test_storing_a_run_already_stored_fills_in_the_link_of_entries_stored_before_they_named_it(tmp_path):
    """Entries stored before 2026-11-30 lack ``link`` (the --gpus scheduler reads it): storing the latest
    run again gives them its link and nothing else; a run that names no link writes nothing."""
    from aisp.judge import expectations

    mine = good_pair_folder(tmp_path)
    entry = {"speedup": {"value": 2.0, "low": 1.9, "high": 2.1}, "headline": "time", "best": "optimized_good",
             "provenance": {"date": "2026-11-29T00:00:00"}, "history": [{"run": "run-1", "speedup": 2.0}]}
    path = mine / "expectations_cpu.json"
    path.write_text(json.dumps({"hardware_key": "cpu", "entries": {"good": entry}}))
    result = {"target": "mine:good", "name": "good", "verdict": "ok", "speedup": entry["speedup"],
              "baseline": {"name": "baseline_good"}, "files": [str(mine / "baseline_good.py")],
              "workload": {"link": "h2d"}}
    env = {"hardware_key": "cpu", "gpu_name": None, "run_id": "run-1"}
    assert expectations.update([{**result, "workload": {}}], env) == []
    assert expectations.update([result], env) == [path]
    stored = json.loads(path.read_text())["entries"]["good"]
    assert stored == {**entry, "link": "h2d"}
    assert expectations.update([result], env) == [], "stored with its link: nothing left to write"


def test_a_folder_that_is_not_a_finished_run_is_bad_usage(tmp_path):
    out = runner.invoke(app, ["bench", "store", str(tmp_path)])
    assert out.exit_code == 2
    assert "not a finished run folder" in out.output
