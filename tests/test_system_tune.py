"""``tune``: plan, apply (only what differs, state saved first, verified), rollback, refusals.

Everything runs against a temporary copy of the fake host tree, never the real /proc or /sys.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from aisp.system import tune
from aisp.system.audit import run_audit
from aisp.system.model import AuditContext

FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dst = tmp_path / "root"
    shutil.copytree(FIXTURE, dst)
    return dst


def text(root: Path, rel: str) -> str:
    return (root / rel).read_text().strip()


def test_plan_lists_only_differences(root: Path) -> None:
    plan = {s.path: s for s in tune.make_plan(root, "training")}
    assert plan["/proc/sys/kernel/numa_balancing"].action == "write"
    assert plan["/sys/kernel/mm/transparent_hugepage/enabled"].current == "madvise"
    assert plan["/sys/kernel/mm/transparent_hugepage/enabled"].target == "always"
    assert plan["/proc/sys/vm/dirty_background_ratio"].action == "ok"  # already 10
    governors = [p for p in plan if p.endswith("scaling_governor")]
    assert len(governors) == 8 and all(plan[p].action == "write" for p in governors)
    inference = {s.path: s for s in tune.make_plan(root, "inference")}
    assert inference["/sys/kernel/mm/transparent_hugepage/enabled"].action == "ok"


def test_absent_and_guarded_knobs(root: Path) -> None:
    shutil.rmtree(root / "sys/kernel/mm/transparent_hugepage")
    (root / "proc/sys/vm/dirty_bytes").write_text("1073741824\n")
    plan = {s.path: s for s in tune.make_plan(root, "training")}
    assert plan["/sys/kernel/mm/transparent_hugepage/enabled"].action == "absent"
    assert plan["/proc/sys/vm/dirty_ratio"].action == "skip" and "dirty_bytes" in plan["/proc/sys/vm/dirty_ratio"].note


def test_apply_saves_state_first_writes_and_verifies(root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / "s.json"
    plan = tune.make_plan(root, "training")
    outcomes = tune.apply_plan(plan, root, "training", state, is_root=True)
    assert outcomes and all(o.ok for o in outcomes)
    assert len(outcomes) == sum(s.action == "write" for s in plan)
    assert text(root, "proc/sys/kernel/numa_balancing") == "0"
    assert text(root, "sys/kernel/mm/transparent_hugepage/enabled") == "always"
    assert text(root, "sys/devices/system/cpu/cpu5/cpufreq/scaling_governor") == "performance"
    saved = json.loads(state.read_text())
    assert saved["schema_version"] == tune.STATE_SCHEMA_VERSION and saved["root"] == str(root)
    prev = {i["path"]: i["previous"] for i in saved["items"]}
    assert prev["/proc/sys/kernel/numa_balancing"] == "1"
    assert prev["/sys/kernel/mm/transparent_hugepage/defrag"] == "always"
    assert "/proc/sys/vm/dirty_background_ratio" not in prev  # unchanged knobs are not recorded
    assert not list(state.parent.glob(".*.tmp"))  # atomic write left no temp file


def test_second_apply_is_a_no_op(root: Path, tmp_path: Path) -> None:
    tune.apply_plan(tune.make_plan(root, "training"), root, "training", tmp_path / "a.json", is_root=True)
    again = tune.make_plan(root, "training")
    assert {s.action for s in again} <= {"ok", "absent", "skip"}
    assert tune.apply_plan(again, root, "training", tmp_path / "b.json", is_root=True) == []
    assert not (tmp_path / "b.json").exists()


def test_rollback_restores_recorded_values(root: Path, tmp_path: Path) -> None:
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    state = tmp_path / "s.json"
    tune.apply_plan(tune.make_plan(root, "training"), root, "training", state, is_root=True)
    outcomes = tune.rollback(state, is_root=True)
    assert outcomes and all(o.ok for o in outcomes)
    assert text(root, "proc/sys/kernel/numa_balancing") == "1"
    assert text(root, "sys/kernel/mm/transparent_hugepage/defrag") == "always"
    restored = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    changed = [p for p in before if not p.name.startswith(("enabled", "defrag")) and before[p] != restored[p]]
    assert changed == []  # selector files now hold the bare word; every other file is byte-identical
    assert tune.rollback(state, is_root=True) == []  # nothing left to restore


def test_refusals_change_nothing(root: Path, tmp_path: Path, monkeypatch) -> None:
    plan = tune.make_plan(root, "training")
    with pytest.raises(PermissionError, match="needs root"):
        tune.apply_plan(plan, root, "training", tmp_path / "s.json", is_root=False)
    real_statvfs = os.statvfs

    class ReadOnly:
        def __init__(self, st):
            self.f_flag = st.f_flag | os.ST_RDONLY

    monkeypatch.setattr(tune.os, "statvfs", lambda p: ReadOnly(real_statvfs(p)))
    with pytest.raises(PermissionError, match="not writable"):
        tune.apply_plan(plan, root, "training", tmp_path / "s.json", is_root=True)
    assert not (tmp_path / "s.json").exists()
    assert text(root, "proc/sys/kernel/numa_balancing") == "1"


def test_write_that_does_not_take_stops_the_apply(root: Path, tmp_path: Path) -> None:
    knob = root / "proc/sys/kernel/numa_balancing"
    knob.unlink()
    knob.symlink_to("/dev/null")  # accepts the write, reads back empty
    plan = [tune.Step("cpu.numa.balancing", "/proc/sys/kernel/numa_balancing", "1", "0", "write"),
            tune.Step("mem.swappiness", "/proc/sys/vm/swappiness", "60", "10", "write")]
    outcomes = tune.apply_plan(plan, root, "training", tmp_path / "s.json", is_root=True)
    assert len(outcomes) == 1 and not outcomes[0].ok and outcomes[0].error == "value did not take"
    assert text(root, "proc/sys/vm/swappiness") == "60"
    assert len(json.loads((tmp_path / "s.json").read_text())["items"]) == 2


def test_rollback_rejects_foreign_files(tmp_path: Path) -> None:
    bogus = tmp_path / "x.json"
    bogus.write_text(json.dumps({"schema_version": 99, "items": []}))
    with pytest.raises(ValueError, match="not an aisp tune state file"):
        tune.rollback(bogus, is_root=True)


def test_manual_steps_exclude_what_tune_applies(root: Path) -> None:
    findings = run_audit(AuditContext(root=root, env={}, probe_torch=False))
    manual = {f.check for f in tune.manual_steps(findings)}
    assert {"mem.swap", "mem.memlock", "mem.shm"} <= manual
    assert not manual & {"cpu.governor", "mem.thp.enabled", "cpu.numa.balancing", "mem.swappiness"}
