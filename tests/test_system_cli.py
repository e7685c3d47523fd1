"""``aisp system audit|tune|manifest`` through the CLI: JSON against its schema, exit codes, thin commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aisp.cli import system as cli
from aisp.cli.main import app
from aisp.system import commands
from aisp.system.audit import AUDIT_SCHEMA, EXIT_FAIL, EXIT_HARDWARE
from aisp.system.nvml import StaticNvml

# A test extra (pyproject's [test]); the GPU machines run `pytest -m gpu tests/` without it, and this module has no GPU test.
jsonschema = pytest.importorskip("jsonschema")

FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"
runner = CliRunner()


def test_audit_json_on_fake_root_matches_schema() -> None:
    res = runner.invoke(app, ["system", "audit", "--root", str(FIXTURE), "--json", "--no-gpu", "--no-torch"])
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, AUDIT_SCHEMA)
    assert res.exit_code == EXIT_FAIL == doc["summary"]["exit_code"]  # the 64 MiB /dev/shm
    assert doc["findings"][0]["grade"] == "FAIL"
    assert {f["check"] for f in doc["findings"]} >= {"cpu.governor", "mem.thp.enabled", "mem.memlock", "gpu.nvml"}


def test_audit_of_this_machine_runs_without_root() -> None:
    res = runner.invoke(app, ["system", "audit", "--json", "--no-torch"])
    assert res.exit_code in (0, 1, 3), res.output
    jsonschema.validate(json.loads(res.stdout), AUDIT_SCHEMA)


def test_schema_rejects_a_malformed_report() -> None:
    res = runner.invoke(app, ["system", "audit", "--root", str(FIXTURE), "--json", "--no-gpu", "--no-torch"])
    doc = json.loads(res.stdout)
    doc["findings"][0]["grade"] = "OK"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, AUDIT_SCHEMA)


def test_hardware_fault_exit_code(monkeypatch) -> None:
    from test_system_gpu import healthy

    nvml = StaticNvml([healthy(GetCurrentClocksEventReasons=0x8)], {"GetDriverVersion": "580",
                                                                     "GetCudaDriverVersion": 13000})
    monkeypatch.setattr(commands, "open_nvml", lambda: (nvml, ""))
    res = runner.invoke(app, ["system", "audit", "--root", str(FIXTURE), "--no-torch"])
    assert res.exit_code == EXIT_HARDWARE
    assert "hardware fault" in res.stdout


def test_help_documents_exit_codes() -> None:
    res = runner.invoke(app, ["system", "audit", "--help"], env={"COLUMNS": "200"})
    assert "Exit codes" in res.stdout and "hardware fault" in res.stdout


def test_bad_profile_is_usage_error() -> None:
    res = runner.invoke(app, ["system", "audit", "--profile", "gaming"])
    assert res.exit_code == 2


def test_commands_are_thin(monkeypatch) -> None:
    seen = {}
    monkeypatch.setattr(cli, "audit_main", lambda opts: seen.setdefault("audit", opts) and 0)
    monkeypatch.setattr(cli, "tune_main", lambda opts: seen.setdefault("tune", opts) and 0)
    runner.invoke(app, ["system", "audit", "--profile", "inference", "--strict", "--data-path", "/data"])
    runner.invoke(app, ["system", "tune", "--profile", "inference", "--apply", "--root", "/tmp/x"])
    assert seen["audit"] == commands.AuditOptions(profile="inference", data_path=Path("/data"), strict=True)
    assert seen["tune"] == commands.TuneOptions(profile="inference", root=Path("/tmp/x"), apply=True)


def test_tune_plan_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(FIXTURE, root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    res = runner.invoke(app, ["system", "tune", "--root", str(root), "--profile", "training"],
                        env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "plan only: nothing was changed" in res.stdout and "swapoff -a" in res.stdout
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before


def test_tune_apply_and_rollback_through_cli(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "root"
    shutil.copytree(FIXTURE, root)
    monkeypatch.setattr(commands, "_is_root", lambda: True)
    state = tmp_path / "state.json"
    res = runner.invoke(app, ["system", "tune", "--root", str(root), "--apply", "--state", str(state)])
    assert res.exit_code == 0, res.output
    assert (root / "proc/sys/kernel/numa_balancing").read_text().strip() == "0"
    res = runner.invoke(app, ["system", "tune", "--rollback", str(state)])
    assert res.exit_code == 0, res.output
    assert (root / "proc/sys/kernel/numa_balancing").read_text().strip() == "1"


def test_tune_apply_refused_without_root(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "root"
    shutil.copytree(FIXTURE, root)
    monkeypatch.setattr(commands, "_is_root", lambda: False)
    res = runner.invoke(app, ["system", "tune", "--root", str(root), "--apply", "--state", str(tmp_path / "s.json")])
    assert res.exit_code == 1 and "needs root" in res.stdout
    assert not (tmp_path / "s.json").exists()
    assert (root / "proc/sys/kernel/numa_balancing").read_text().strip() == "1"
