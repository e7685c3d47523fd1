"""What makes two runs comparable (the fingerprint, provenance), the host-bound noise model, and the
re-runs that confirm or clear a regression flag."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from aisp import suite
from aisp.harness import environment
from aisp.harness.results import assemble, failed
from aisp.judge import expectations
from aisp.judge.regression import judge_entry

ENV = {"hardware_key": "h200", "gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "580", "cuda": "13.0",
       "torch": "2.11", "triton": "3.5.0", "python": "3.12.3", "cpu_model": "Intel Xeon Platinum 8480C",
       "nvlink": [18, 18], "git_commit": "abc"}
TWO_GPU_HOST = {**ENV, "hardware_key": "2x_h200", "gpu_count": 2}


def _result(folder, name, opt_ms, seed, noise=0.01, gpus=1, host_bound=False):
    rng = np.random.default_rng(seed)
    raw = [{"name": f"baseline_{name}", "verdict": "pending", "memory": {},
            "samples_ms": list(10 * (1 + rng.normal(0, noise, 30)))},
           {"name": f"optimized_{name}", "verdict": "pending", "memory": {},
            "samples_ms": list(opt_ms * (1 + rng.normal(0, noise, 30)))}]
    pair = {"target": f"{folder.name}:{name}", "group": folder.name, "name": name,
            "files": [str(folder / f"baseline_{name}.py")]}
    result = assemble(pair, {"headline": "time", "requires": {"gpus": gpus, "ranks": 1}}, raw)
    if host_bound:
        result["variants"][0]["host_bound"] = {"issue_ms": opt_ms, "events_ms": opt_ms, "events_over_issue": 1.0}
    return result


@pytest.mark.parametrize(("field", "value"), [("cpu_model", "AMD EPYC 9654"), ("python", "3.13.1"),
                                              ("triton", "3.6.0")])
def test_a_changed_cpu_python_or_triton_is_not_compared_never_regressed(tmp_path, field, value):
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 9, seed=2), {**ENV, field: value})
    outcome = judged["expectation"]
    assert judged["verdict"] == "ok" and outcome["status"] == "not-compared"
    assert outcome["changes"] == [f"{field}: {ENV[field]} -> {value}"]
    assert expectations.judge(_result(tmp_path, "a", 9, seed=2), ENV)["verdict"] == "regressed"


def test_a_two_gpu_pair_on_a_bigger_host_has_a_file_of_its_own(tmp_path):
    """ch04:dataparallel ran 1.48x on 2 GPUs of a 4-GPU host against 1.75x stored on a 2-GPU host:
    the 4-GPU host's runs go to expectations_2x_h200_host4.json, judged there, and never replace the
    2-GPU host's entry (on 2026-11-28 storing a 4-GPU host's run had replaced it)."""
    expectations.update([_result(tmp_path, "dp", 10 / 1.75, seed=1, gpus=2)], TWO_GPU_HOST)
    two_host = (tmp_path / "expectations_2x_h200.json").read_text()
    four = {**TWO_GPU_HOST, "hardware_key": "4x_h200", "gpu_count": 4, "nvlink": [18, 18, 18, 18]}
    first = expectations.judge(_result(tmp_path, "dp", 10 / 1.48, seed=2, gpus=2), four)
    assert first["verdict"] == "ok" and first["expectation"]["status"] == "new"
    assert first["expectation"]["hardware_key"] == "2x_h200_host4"
    expectations.update([first], four)
    assert (tmp_path / "expectations_2x_h200.json").read_text() == two_host
    assert "dp" in json.loads((tmp_path / "expectations_2x_h200_host4.json").read_text())["entries"]
    again = expectations.judge(_result(tmp_path, "dp", 10 / 1.48, seed=3, gpus=2), four)
    assert again["expectation"]["status"] == "ok", again["expectation"]["detail"]
    slower = expectations.judge(_result(tmp_path, "dp", 10 / 1.0, seed=4, gpus=2), four)
    assert slower["verdict"] == "regressed"
    back = expectations.judge(_result(tmp_path, "dp", 10 / 1.75, seed=5, gpus=2), TWO_GPU_HOST)
    assert back["expectation"]["status"] == "ok" and back["expectation"]["hardware_key"] == "2x_h200"
    pcie = expectations.judge(_result(tmp_path, "dp", 10 / 1.48, seed=2, gpus=2), {**TWO_GPU_HOST, "nvlink": [0, 0]})
    assert pcie["expectation"]["why"] == "environment changed"
    assert pcie["expectation"]["changes"] == ["nvlink: [18, 18] -> [0, 0]"]


def test_the_peaks_of_a_two_gpu_pair_on_a_bigger_host_are_its_two_gpus(tmp_path):
    four = {**TWO_GPU_HOST, "hardware_key": "4x_h200", "gpu_count": 4}
    two = _result(tmp_path, "dp", 5, seed=1, gpus=2)
    assert expectations.gpu_key(two, four) == "2x_h200" and expectations.key_for(two, four) == "2x_h200_host4"
    one = _result(tmp_path, "a", 5, seed=1)
    assert expectations.key_for(one, four) == expectations.gpu_key(one, four) == "h200"
    assert expectations.key_for(two, TWO_GPU_HOST) == "2x_h200"


def test_a_cpu_run_on_a_gpu_host_is_keyed_cpu_and_never_judged_against_the_gpus_file(tmp_path, monkeypatch):
    """``--device cpu`` on an H200 host: the manifest is the CPU's (key ``cpu``, no GPU), so its timings
    go to expectations_cpu.json; before, the host's GPU gave it the ``h200`` key, and a CPU run was
    judged against (or stored into) the H200's expectations. A run on the GPU keeps the GPU's key."""
    h200 = {"gpu_name": "NVIDIA H200", "gpu_count": 1, "compute_capability": "9.0"}
    monkeypatch.setattr(environment, "_gpu", lambda: h200)
    monkeypatch.setattr(environment, "hardware_key", lambda *a: "h200")
    on_cpu = environment.manifest(tmp_path, {"device": "cpu"})
    assert on_cpu["hardware_key"] == "cpu" and on_cpu["gpu_name"] is None and on_cpu["gpu_count"] == 0
    on_gpu = environment.manifest(tmp_path, {"device": "auto"})
    assert on_gpu["hardware_key"] == "h200" and on_gpu["gpu_name"] == "NVIDIA H200"
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 8, seed=2), {**ENV, **on_cpu})  # regressed against the H200's 5
    assert expectations.key_for(judged, on_cpu) == "cpu"
    assert judged["verdict"] == "ok" and judged["expectation"]["status"] == "new"


def test_a_one_gpu_pair_is_compared_whatever_the_hosts_gpu_count(tmp_path):
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 5, seed=2), {**ENV, "gpu_count": 4, "nvlink": [18] * 4})
    assert judged["expectation"]["status"] == "ok", judged["expectation"]["detail"]


def test_an_entry_stored_before_a_field_was_fingerprinted_is_still_compared(tmp_path):
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    path = tmp_path / "expectations_h200.json"
    doc = json.loads(path.read_text())
    doc["entries"]["a"]["environment"] = {k: v for k, v in doc["entries"]["a"]["environment"].items()
                                          if k not in ("triton", "python", "cpu_model")}
    path.write_text(json.dumps(doc))
    assert expectations.judge(_result(tmp_path, "a", 5, seed=2), ENV)["expectation"]["status"] == "ok"


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_provenance_is_the_commit_that_ran_with_the_diff_hash_of_a_dirty_tree(tmp_path):
    repo = tmp_path / "repo"
    (repo / "ch01").mkdir(parents=True)
    (repo / "ch01" / "baseline_a.py").write_text("x = 1\n")
    (repo / "ch01" / "expectations_h200.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    clean = environment._git(repo)
    assert clean["git_dirty"] is False and clean["git_diff_sha256"] is None and len(clean["git_commit"]) == 40
    (repo / "ch01" / "expectations_h200.json").write_text('{"entries": {}}\n')
    assert environment._git(repo)["git_dirty"] is False, "the file an update writes is not a code change"
    (repo / "ch01" / "baseline_a.py").write_text("x = 2\n")
    dirty = environment._git(repo)
    assert dirty["git_dirty"] is True and len(dirty["git_diff_sha256"]) == 64
    assert dirty["git_commit"] == clean["git_commit"]
    (repo / "ch01" / "baseline_a.py").write_text("x = 3\n")
    assert environment._git(repo)["git_diff_sha256"] != dirty["git_diff_sha256"]
    expectations.update([_result(repo / "ch01", "a", 5, seed=1)], {**ENV, **dirty})
    provenance = expectations.load(repo / "ch01" / "expectations_h200.json")["entries"]["a"]["provenance"]
    assert (provenance["commit"], provenance["dirty"], provenance["diff_sha256"]) == (
        clean["git_commit"], True, dirty["git_diff_sha256"])


def _stored(tmp_path, runs, **kwargs):
    for seed in range(1, runs + 1):
        expectations.update([_result(tmp_path, "a", 5, seed=seed, noise=0.002, **kwargs)], ENV)


def test_a_host_bound_pair_is_judged_with_the_time_prior(tmp_path):
    """The speedup of a pair whose optimized variant is host-bound moves with the host: a 20% drop
    (three quiet stored runs) flags an interleaved pair, not a host-bound one."""
    _stored(tmp_path, 3)
    assert expectations.judge(_result(tmp_path, "a", 6.25, seed=9, noise=0.002), ENV)["verdict"] == "regressed"
    judged = expectations.judge(_result(tmp_path, "a", 6.25, seed=9, noise=0.002, host_bound=True), ENV)
    speedup = next(f for f in judged["expectation"]["figures"] if f["figure"] == "speedup")
    assert judged["expectation"]["status"] == "ok" and speedup["limit"] < -0.3, judged["expectation"]["detail"]


def _host_heavy_baseline(result, **fields):
    """The baseline as a CUDA variant whose host issue is 87% of its events (ch05:uint8_transfer's)."""
    result["baseline"].update({"issue_summary": {"median": 8.7}, "tail_summary": {"median": 0.08},
                               "spacer_ms": 0.0, "syncs_inside": False, **fields})
    return result


@pytest.mark.parametrize(("fields", "widened"), [({}, True), ({"spacer_ms": 0.05}, False),
                                                  ({"syncs_inside": True}, False),
                                                  ({"issue_summary": {"median": 4.0}}, False),
                                                  ({"tail_summary": None}, False)])
def test_a_host_heavy_baseline_is_judged_with_the_time_prior(tmp_path, fields, widened):
    """A baseline whose measured time is mostly host code (issue >= half its events, timed from the call's
    start) moves with the host, so a 20% speedup drop is within the time prior; events behind a spacer, a
    call that waits inside, a host share under half, or a CPU variant (no sync tails) keep the ratio prior."""
    _stored(tmp_path, 3)
    judged = expectations.judge(_host_heavy_baseline(_result(tmp_path, "a", 6.25, seed=9, noise=0.002), **fields), ENV)
    speedup = next(f for f in judged["expectation"]["figures"] if f["figure"] == "speedup")
    assert (judged["expectation"]["status"] == "ok") is widened, judged["expectation"]["detail"]
    assert (speedup["limit"] < -0.3) is widened


def _entry(tmp_path):
    return expectations.load(tmp_path / "expectations_h200.json")["entries"]["a"]


def _judged(tmp_path, first_ms, rerun_ms):
    """A run at ``first_ms`` with re-runs at ``rerun_ms`` (None: a re-run that failed)."""
    result = _result(tmp_path, "a", first_ms, seed=20)
    reruns = [_result(tmp_path, "a", ms, seed=21 + i) if ms else failed({"target": "x:a"}, "error", "boom")
              for i, ms in enumerate(rerun_ms)]
    return judge_entry({**result, "reruns": reruns}, _entry(tmp_path), expectations.pair_fingerprint(result, ENV))


def test_re_runs_that_regress_too_confirm_the_flag(tmp_path):
    _stored(tmp_path, 3)
    outcome = _judged(tmp_path, 7, [7, 7.2])
    assert outcome["status"] == "regressed" and outcome["confirmation"]["confirmed"]
    assert "confirmed by the mean of 2 re-run(s): speedup" in outcome["detail"]


def test_re_runs_back_at_the_stored_level_clear_the_flag(tmp_path):
    _stored(tmp_path, 3)
    outcome = _judged(tmp_path, 7, [5, 5.1])
    assert outcome["status"] == "ok" and not outcome["confirmation"]["confirmed"]
    assert outcome["detail"].startswith("flagged (speedup") and "not confirmed by the mean of 2 re-run(s)" in outcome["detail"]


def test_storing_a_run_whose_flag_the_re_runs_cleared_keeps_the_history(tmp_path):
    _stored(tmp_path, 3)
    cleared = {**_result(tmp_path, "a", 7, seed=20), "reruns": [_result(tmp_path, "a", 5, seed=21 + i) for i in range(2)]}
    expectations.update([cleared], ENV)
    assert len(_entry(tmp_path)["history"]) == 4
    other = tmp_path / "other"
    other.mkdir()
    _stored(other, 3)
    confirmed = {**_result(other, "a", 7, seed=30), "reruns": [_result(other, "a", 7, seed=31 + i) for i in range(2)]}
    expectations.update([confirmed], ENV)
    assert len(_entry(other)["history"]) == 1, "a confirmed change of level starts a new history"


def test_re_runs_that_could_not_be_compared_leave_the_pair_not_compared(tmp_path):
    _stored(tmp_path, 3)
    outcome = _judged(tmp_path, 7, [None, None])
    assert outcome["status"] == "not-compared" and outcome["why"] == "not confirmed"
    assert "none of 2 re-run(s) could be compared" in outcome["detail"]
    assert _judged(tmp_path, 7, [None, 7.1])["status"] == "regressed", "one measured re-run is enough"


def test_the_suite_re_runs_only_a_flagged_pair_and_as_often_as_asked(tmp_path):
    _stored(tmp_path, 3)
    confirm = suite._confirm_step(3)
    calls = []

    def again(i):
        calls.append(i)
        return _result(tmp_path, "a", 7, seed=30 + i)
    manifest = suite.PairContext(ENV, tmp_path)
    quiet = _result(tmp_path, "a", 5, seed=40)
    assert confirm(quiet, manifest, again) is quiet and calls == []
    flagged = confirm(_result(tmp_path, "a", 7, seed=41), manifest, again)
    assert calls == [0, 1, 2] and len(flagged["reruns"]) == 3
    judged = expectations.judge(flagged, ENV)
    assert judged["verdict"] == "regressed" and judged["expectation"]["confirmation"]["runs"] == 3
    assert any(n.startswith("expectations: ") and "confirmed by the mean of 3" in n for n in judged["notes"])


def test_a_multi_gpu_entry_that_never_recorded_the_hosts_gpus_is_not_compared(tmp_path):
    """Stored before the host's GPU count and NVLinks were fingerprinted: not compared, the
    unrecorded fields listed; never regressed."""
    expectations.update([_result(tmp_path, "dp", 10 / 4.2, seed=1, gpus=2)], TWO_GPU_HOST)
    path = tmp_path / "expectations_2x_h200.json"
    doc = json.loads(path.read_text())
    for field in ("host_gpu_count", "nvlink"):
        del doc["entries"]["dp"]["environment"][field]
    path.write_text(json.dumps(doc))
    outcome = expectations.judge(_result(tmp_path, "dp", 10 / 1.65, seed=2, gpus=2), TWO_GPU_HOST)["expectation"]
    assert outcome["why"] == "environment changed"
    assert outcome["changes"] == ["host_gpu_count: not recorded -> 2", "nvlink: not recorded -> [18, 18]"]


def test_a_result_from_a_reused_worker_is_neither_judged_nor_stored(tmp_path):
    """--reuse-workers: a pair measured after others in the same process is not held against
    expectations from fresh processes (ch01:preallocated_buffers ran 40% slower there on an H200),
    nor stored; the first pair of a worker (no earlier pair) is."""
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    slower = _result(tmp_path, "a", 9, seed=2)
    slower["placement"] = {"reused_worker": {"pid": 7, "earlier_pairs": 3}}
    judged = expectations.judge(slower, ENV)
    assert judged["verdict"] == "ok" and judged["expectation"]["why"] == "reused worker"
    assert "after 3 other pair(s)" in judged["expectation"]["detail"]
    assert expectations.refused([slower]) and "reused worker" in expectations.refused([slower])[0]
    first = _result(tmp_path, "a", 9, seed=2)
    first["placement"] = {"reused_worker": {"pid": 7, "earlier_pairs": 0}}
    assert expectations.judge(first, ENV)["verdict"] == "regressed"


@pytest.mark.parametrize(("link", "widened"), [("h2d", True), ("page_cache", True), ("hbm", False), (None, False)])
def test_a_pair_over_a_host_rate_link_is_judged_with_the_time_prior(tmp_path, link, widened):
    """ch01:pinned_memory's pageable baseline moved 13.8-21.4 ms between H200 hosts while its pinned copy
    held: a 20% speedup drop over a link the host sets (h2d, page cache, ...) is within the time prior;
    over HBM, or with no link declared, it is still a regression."""
    _stored(tmp_path, 3)
    result = _result(tmp_path, "a", 6.25, seed=9, noise=0.002)
    result["workload"]["link"] = link
    judged = expectations.judge(result, ENV)
    speedup = next(f for f in judged["expectation"]["figures"] if f["figure"] == "speedup")
    assert (judged["verdict"] == "ok") is widened, judged["expectation"]["detail"]
    assert (speedup["limit"] < -0.3) is widened
