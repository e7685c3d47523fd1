"""The published JSON Schemas: valid schemas, met by every artifact of a real CPU run, by the
dashboard's synthetic runs and by every committed expectations file; broken documents fail them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS, REPO
from dashboard_runs import write_runs
from typer.testing import CliRunner

from aisp import schemas
from aisp.cli.main import app

pytest.importorskip("jsonschema")
EXPECTATION_FILES = sorted(REPO.glob("ch*/expectations_*.json"))


def _errors(name: str, document: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in schemas.validator(name).iter_errors(document)]


def _checked(folder: Path) -> dict[str, int]:
    """Validate every JSON file under ``folder`` that has a schema; counts per schema."""
    counts: dict[str, int] = {}
    for path in sorted(folder.rglob("*.json")):
        name = schemas.for_file(path)
        if name:
            assert not _errors(name, json.loads(path.read_text())), path
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_the_schemas_are_valid_draft_2020_12():
    from jsonschema import Draft202012Validator

    for name in (*schemas.NAMES, "defs"):
        Draft202012Validator.check_schema(schemas.load(name))


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> Path:
    """A real run of the harness on a CPU: a timed pair, a verify failure, an error, a skip."""
    root = tmp_path_factory.mktemp("art")
    targets = ["pairs:good", "pairs:wrong_shape", "pairs:raises", "pairs:needs_gpu"]
    result = CliRunner().invoke(app, ["bench", "run", "--root", str(FIXTURE_PAIRS), *[a for t in targets for a in ("-t", t)],
                                      "--artifacts-dir", str(root), "--iterations", "3", "--warmup", "1", "--warmup-s", "0"])
    assert result.exit_code == 5, result.output
    return next(root.iterdir())


def test_every_artifact_of_a_cpu_run_meets_its_schema(cpu_run):
    verdicts = {r["verdict"] for r in json.loads((cpu_run / "summary.json").read_text())["results"]}
    assert {"verify-failed", "error", "skipped"} <= verdicts
    assert _checked(cpu_run) == {"manifest": 1, "summary": 1, "result": 4}


def test_the_dashboards_synthetic_runs_meet_the_schemas(tmp_path):
    write_runs(tmp_path, count=1)
    assert _checked(tmp_path) == {"manifest": 1, "summary": 1, "result": 8}


@pytest.mark.parametrize("path", EXPECTATION_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_expectations_meet_the_schema(path):
    assert schemas.for_file(path) == "expectations"
    assert not _errors("expectations", json.loads(path.read_text()))


def test_there_are_committed_expectations_to_check():
    assert len(EXPECTATION_FILES) >= 20


def test_broken_documents_fail_their_schema(cpu_run):
    summary = json.loads((cpu_run / "summary.json").read_text())
    good = next(r for r in summary["results"] if r["verdict"] not in ("error", "skipped", "verify-failed"))
    for breakage, expected in [
        (lambda r: r.pop("verdict"), "'verdict' is a required property"),
        (lambda r: r.update(target="no-colon"), "does not match"),
        (lambda r: r.update(speedup={"value": "fast", "low": 1, "high": 2}), "is not valid under any"),
        (lambda r: r["baseline"].update(samples_ms=["1.0"]), "is not of type 'number'"),
    ]:
        broken = copy.deepcopy(good)
        breakage(broken)
        assert any(expected in e for e in _errors("result", broken)), expected
    assert any("'run_id' is a required" in e for e in _errors("summary", {k: v for k, v in summary.items() if k != "run_id"}))
    stored = json.loads(EXPECTATION_FILES[0].read_text())
    entry = next(iter(stored["entries"].values()))
    entry["history"] = [dict(entry.get("history", [{}])[0] or {"date": "d", "speedup": 1.0})] * 11
    assert any("is too long" in e for e in _errors("expectations", stored))
    manifest = json.loads((cpu_run / "manifest.json").read_text())
    manifest["gpu_count"] = "one"
    assert any("'one' is not of type 'integer'" in e for e in _errors("manifest", manifest))
