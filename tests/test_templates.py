"""The cluster templates, offline: the Kubernetes Indexed Job passes chapter 3's manifest checks
(schema and GPU-pod rules) and its shell step, run with a stub ``python`` for every index, hands
`aisp bench run` one shard each and merges once all have finished; the Slurm array script passes
bash -n and, dry-run, expands to the shard and merge commands that the CLI accepts; the submit
script chains the merge after the array."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness.distributed import NVLS_OFF
from aisp.system.manifests import validate_manifest

K8S = REPO / "deploy" / "k8s" / "aisp-shards-job.yaml"
SLURM = REPO / "deploy" / "slurm"
STUB_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
if [ "$3" = "bench" ]; then
  while [ $# -gt 0 ]; do [ "$1" = "--artifacts-dir" ] && mkdir -p "$2/20260101-000000"; shift; done
  exit "${STUB_CODE:-0}"
fi
exit 3
"""


def options_of(argv: list[str], monkeypatch: pytest.MonkeyPatch):
    """The RunOptions the CLI builds from ``aisp`` arguments (no pair runs)."""
    seen = {}
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.update(
        targets=targets, options=options) or 0)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return seen


@pytest.fixture(scope="module")
def job() -> dict:
    docs = {d["kind"]: d for d in yaml.safe_load_all(K8S.read_text())}
    return docs["Job"]


def container(job: dict) -> dict:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def test_manifest_passes_the_chapter_3_checks():
    problems = validate_manifest(K8S.read_text(), K8S.name)
    assert [p for p in problems if p.severity != "info"] == [], problems


def test_manifest_is_an_indexed_job_whose_shards_match_its_pods(job):
    spec, env = job["spec"], {e["name"]: e for e in container(job)["env"]}
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["AISP_SHARDS"]["value"])
    assert {k: env[k]["value"] for k in NVLS_OFF} == NVLS_OFF
    mounts = {m["name"]: m["mountPath"] for m in container(job)["volumeMounts"]}
    claims = {v["name"]: v.get("persistentVolumeClaim") for v in job["spec"]["template"]["spec"]["volumes"]}
    assert mounts["runs"] == "/runs" and claims["runs"]["claimName"] == "aisp-runs"
    assert "$JOB_COMPLETION_INDEX/$AISP_SHARDS" in container(job)["args"][0]


def run_indexed_step(job: dict, tmp_path: Path, code: int) -> tuple[list[list[str]], Path]:
    """The container's script for every index in turn, /runs in a temporary folder, a stub python."""
    script = container(job)["args"][0].replace("/runs/", f"{tmp_path}/runs/")
    subprocess.run(["bash", "-n", "-c", script], check=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text(STUB_PYTHON)
    (tmp_path / "bin" / "python").chmod(0o755)
    log = tmp_path / "calls.txt"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "STUB_LOG": str(log),
           "STUB_CODE": str(code), "RUN_ID": "uid-1", "AISP_SHARDS": "4", "AISP_ARGS": "-t ch01 -t ch02"}
    for index in range(4):
        proc = subprocess.run(["bash", "-c", script], env={**env, "JOB_COMPLETION_INDEX": str(index)},
                              capture_output=True, text=True)
        assert proc.returncode == (0 if code in (0, 1, 3, 4, 5) else code), proc.stderr
    return [line.split() for line in log.read_text().splitlines()], tmp_path / "runs" / "uid-1"


def test_each_pod_runs_its_shard_and_the_last_merges(job, tmp_path, monkeypatch):
    calls, out = run_indexed_step(job, tmp_path, code=1)
    benches, merges = calls[:4], calls[4:]
    for index, argv in enumerate(benches):
        seen = options_of(argv[2:], monkeypatch)
        assert seen["options"].shard == f"{index}/4" and seen["options"].gpus == "all"
        assert seen["options"].artifacts_dir == out / f"shard-{index}" and seen["targets"] == ["ch01", "ch02"]
    (merge,) = merges
    assert merge[2:4] == ["report", "merge"] and merge[-2:] == ["-o", str(out / "merged")]
    assert sorted(merge[4:-2]) == [f"{out}/shard-{i}/20260101-000000/" for i in range(4)]
    assert (out / "merged.exit_code").read_text().strip() == "3"


def test_a_pod_with_bad_usage_fails_and_nobody_merges(job, tmp_path):
    calls, out = run_indexed_step(job, tmp_path, code=2)
    assert len(calls) == 4 and not (out / "merged.exit_code").exists()


def slurm(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SLURM / "aisp-shards.sbatch"), *args], env={**os.environ, **env},
                          capture_output=True, text=True, cwd=REPO)


def test_sbatch_scripts_are_valid_bash():
    for name in ("aisp-shards.sbatch", "submit-shards.sh"):
        subprocess.run(["bash", "-n", str(SLURM / name)], check=True)


def test_array_task_expands_to_its_shard(tmp_path, monkeypatch):
    env = {"AISP_DRY_RUN": "1", "AISP_SHARED": str(tmp_path), "SLURM_ARRAY_JOB_ID": "77",
           "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_SUBMIT_DIR": str(REPO)}
    proc = slurm(["-t", "ch01", "--iterations", "30"], env)
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert argv[:3] == ["python", "-m", "aisp"]
    seen = options_of(argv[3:], monkeypatch)
    assert (seen["options"].shard, seen["options"].gpus, seen["options"].iterations) == ("2/4", "all", 30)
    assert seen["options"].artifacts_dir == tmp_path / "77" / "shard-2" and seen["targets"] == ["ch01"]


def test_merge_job_expands_to_a_merge_of_every_shard(tmp_path):
    for i in range(3):
        (tmp_path / "77" / f"shard-{i}" / "20260101-000000").mkdir(parents=True)
    env = {"AISP_DRY_RUN": "1", "AISP_SHARED": str(tmp_path), "AISP_MERGE": "1", "AISP_RUN": "77",
           "SLURM_JOB_ID": "78"}
    argv = shlex.split(slurm([], env).stdout.strip().splitlines()[-1])
    assert argv[3:5] == ["report", "merge"] and argv[-2:] == ["-o", str(tmp_path / "77" / "merged")]
    assert len(argv[5:-2]) == 3 and all("/77/shard-" in a for a in argv[5:-2])
    missing = slurm([], {**env, "AISP_RUN": "99"})
    assert missing.returncode == 5 and "no shard of run 99" in missing.stderr


def test_outside_an_array_the_task_says_so(tmp_path):
    proc = slurm([], {"AISP_DRY_RUN": "1", "AISP_SHARED": str(tmp_path), "SLURM_JOB_ID": "5",
                      "SLURM_ARRAY_TASK_ID": "", "SLURM_ARRAY_TASK_COUNT": ""})
    assert proc.returncode != 0 and "sbatch --array" in proc.stderr


def test_submit_chains_the_merge_after_the_array(tmp_path):
    (tmp_path / "sbatch").write_text('#!/usr/bin/env bash\necho "$*" >> "$STUB_LOG"\necho "$((40 + $(wc -l < "$STUB_LOG")));cluster"\n')
    (tmp_path / "sbatch").chmod(0o755)
    log = tmp_path / "sbatch.txt"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "STUB_LOG": str(log), "AISP_SHARED": "/shared"}
    proc = subprocess.run(["bash", str(SLURM / "submit-shards.sh"), "4", "-t", "ch13"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    array, merge = log.read_text().splitlines()
    assert array.startswith("--parsable --array=0-3 ") and array.endswith("aisp-shards.sbatch -t ch13")
    assert "--dependency=afterany:41 " in merge and "AISP_MERGE=1,AISP_RUN=41" in merge
    assert "/shared/41/merged" in proc.stdout
    bad = subprocess.run(["bash", str(SLURM / "submit-shards.sh"), "0"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "positive count" in bad.stderr
