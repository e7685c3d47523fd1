"""Multi-rank pairs through the real harness path: runner -> worker (torchrun's agent) -> two gloo ranks
on the CPU (tests/fixtures/distributed/). Verification on every rank, slowest-rank timing,
one writer, a hang killed with every rank, a skip when GPUs are too few."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import rank_hints
from torch.distributed.run import config_from_args, get_args_parser, run_script_path

from aisp.harness import distributed, worker
from aisp.harness.benchmark import Requirements, unmet_requirements
from aisp.harness.discovery import resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import Budget, run_suite

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed"
SLOW_MS = 40.0  # common_ranks.SLOW_MS


def _run(names: list[str], artifacts: Path, fork_workers: bool = False) -> tuple[dict[str, dict], Path]:
    pairs = [p for p in resolve_targets([], FIXTURES, (FIXTURES,)) if p.name in names]
    options = RunOptions(iterations=6, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=artifacts,
                         fork_workers=fork_workers)
    results, run_dir = run_suite(pairs, options, hooks=rank_hints(pairs, 2))
    return {r["name"]: r for r in results}, run_dir


HANG_TIMEOUT_S = 8.0  # common_ranks.PidReduce's timeout_s: the hanging pair's, no other's


def limit_once_both_ranks_run(mp: pytest.MonkeyPatch, pid_dir: Path) -> None:
    """The hanging pair's limit applies once both its ranks have recorded their pids: its agent
    reports the limit before torchrun starts them, and a busy host can take longer than the limit to
    start the agent and two ranks (each importing torch), which then had no rank to end. Only that
    pair's limit waits, and for a broken test no longer than 300 s from its start."""
    real = Budget.limit

    def limit(self: Budget, declared: float | None, started: float) -> float:
        if declared == HANG_TIMEOUT_S and len(list(pid_dir.glob("rank*.pid"))) < 2:
            return 300.0
        return real(self, declared, started)
    mp.setattr(Budget, "limit", limit)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Two suites at once (the hang takes its whole timeout): the hang alone, its worker spawned as by
    default (the process model its test is about), and the rest together, their five workers forked
    from one zygote (--fork-workers): a spawned worker imports torch and the harness, ~4 s of CPU
    each. Either way each worker becomes torchrun's agent, which forks its ranks from itself where torch
    is a CPU build."""
    pid_dir = tmp_path_factory.mktemp("pids")
    os.environ["AISP_TEST_PID_DIR"] = str(pid_dir)
    try:
        with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(2) as pool:
            limit_once_both_ranks_run(mp, pid_dir)
            hang = pool.submit(_run, ["rank_hangs"], tmp_path_factory.mktemp("hang"))
            rest = pool.submit(_run, ["slow_rank", "rank_mismatch", "rank_raises", "rank_aborts", "needs_gpus"],
                               tmp_path_factory.mktemp("rest"), fork_workers=True)
            (hang_results, _), (results, run_dir) = hang.result(), rest.result()
    finally:
        del os.environ["AISP_TEST_PID_DIR"]
    assert all(r["placement"]["forked"] for r in results.values()), [r["placement"] for r in results.values()]
    assert not hang_results["rank_hangs"]["placement"]["forked"]
    return {**results, **hang_results}, run_dir, pid_dir


def test_two_ranks_verify_and_time(suite):
    result = suite[0]["slow_rank"]
    # its baseline declares no per-call inputs; an A/A pair's timing verdict on a loaded 2-core host is
    # noise (it read "slower" once with other tests running), so either is accepted
    assert result["verdict"] in ("ok-unchecked", "slower"), result["reason"]
    assert result["unchecked"]
    ranks = result["telemetry"]["ranks"]
    assert ranks["world_size"] == 2 and ranks["backend"] == "gloo"
    from aisp.harness import host
    if host.schedstat() is not None:  # Linux: the most starved rank's run-queue wait while timed
        assert result["host"]["cpu_wait"]["ran_s"] > 0
    assert result["host"]["dispatch_us"] > 0, "the slowest rank's op dispatch cost"
    assert result["host"]["dispatch_cpu"] in range(os.cpu_count() or 1), "the CPU that rank read it on"
    checks = result["variants"][0]["verification"]["checks"]
    assert "each of 2 ranks: matches that rank's baseline" in checks


def test_sample_is_the_slowest_rank(suite):
    """Rank 1 sleeps after the collective; rank 0 returns at once. Each sample is rank 1's. Lower
    bounds from the sleep only: rank 0's figure is this host's speed (a call is fast until a busy
    host keeps rank 1 from the collective); that each rank keeps its own median is checked on given
    samples below."""
    result = suite[0]["slow_rank"]
    medians = result["telemetry"]["ranks"]["median_ms_per_rank"]
    for var in [result["baseline"], *result["variants"]]:
        assert len(medians[var["name"]]) == 2 and medians[var["name"]][1] >= SLOW_MS
        assert min(var["samples_ms"]) >= SLOW_MS


def test_each_sample_is_the_slowest_ranks_and_each_rank_keeps_its_median(monkeypatch):
    """distributed.slowest() on given samples of two ranks (no ranks, no clock): each sample, issue
    time and sync tail is the larger of the two, and each rank's median stays its own."""
    from aisp.harness.execute import Variant
    from aisp.harness.timing import SAMPLE_KEYS

    var = Variant(Path("optimized_x.py"))
    var.samples_ms, var.host_samples_ms = [41.0, 40.0, 44.0], [41.5, 40.5, 44.5]
    var.issue_samples_ms, var.tail_samples_ms = [0.1, 0.1, 0.1], [0.0, 0.2, 0.0]
    other = {key: list(getattr(var, key)) for key in SAMPLE_KEYS}  # rank 0: quick calls, one slow one
    other.update(samples_ms=[0.4, 45.0, 0.3], host_samples_ms=[0.5, 45.5, 0.4], issue_samples_ms=[0.2, 0.1, 0.2])
    monkeypatch.setattr(distributed, "gather", lambda mine: [[([other[key] for key in SAMPLE_KEYS], {1: ["hw_slowdown"]})],
                                                             mine])
    info: dict = {}
    distributed.slowest([var], info)
    assert var.samples_ms == [41.0, 45.0, 44.0] and var.host_samples_ms == [41.5, 45.5, 44.5]
    assert var.issue_samples_ms == [0.2, 0.1, 0.2] and var.tail_samples_ms == [0.0, 0.2, 0.0]
    assert info["median_ms_per_rank"] == {"optimized_x": [0.4, 41.0]} and var.throttled == {1: ["hw_slowdown"]}


def test_wrong_on_one_rank_fails_the_pair(suite):
    result = suite[0]["rank_mismatch"]
    assert result["verdict"] == "verify-failed"
    assert "rank 1: seed " in result["reason"] and "(drawn at random)" in result["reason"]
    assert "outside tolerance" in result["reason"]
    assert "rank 0:" not in result["reason"]
    assert not result["variants"][0]["samples_ms"]


def test_exception_on_one_rank_is_the_reason(suite):
    result = suite[0]["rank_raises"]
    assert result["verdict"] == "error"
    assert result["reason"] == "rank 1: RuntimeError: deliberate failure on rank 1"


def test_a_rank_killed_by_a_signal_stops_the_others_and_is_named(suite):
    """Rank 1 aborts (writing nothing) while rank 0 waits in a collective: torchrun stops rank 0, and
    the agent's reason names rank 1 and the signal before rank 0's echo."""
    result = suite[0]["rank_aborts"]
    assert result["verdict"] == "error"
    assert "rank 1 killed by SIGABRT" in result["reason"]


def test_hang_kills_every_rank(suite):
    """Rank 1 ignores SIGTERM: it goes only because it dies with the agent (PR_SET_PDEATHSIG) or by the
    runner's SIGKILL."""
    results, _, pid_dir = suite
    assert results["rank_hangs"]["verdict"] == "timeout"
    pids = [int(p.read_text()) for p in sorted(pid_dir.glob("rank*.pid"))]
    assert len(pids) == 2, "both ranks started"
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_result_written_once_by_rank_zero(suite):
    results, run_dir, _ = suite
    assert results["slow_rank"]["telemetry"]["ranks"]["written_by_rank"] == 0
    logs = sorted(p.name for p in (run_dir / "distributed_slow_rank" / "logs").iterdir())
    assert logs == ["pair.log", "pair.phase", "pair.result.json", "pair.spec.json", "pair.timeout"]
    doc = json.loads((run_dir / "distributed_slow_rank" / "results" / "benchmark_test_results.json").read_text())
    assert doc["verdict"] in ("ok-unchecked", "slower")  # A/A timing on a loaded host: see above


def test_too_few_gpus_is_a_skip(suite):
    result = suite[0]["needs_gpus"]
    assert result["verdict"] == "skipped"
    assert "needs a CUDA GPU" in result["reason"]


def test_gpu_count_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    reason = unmet_requirements(Requirements(ranks=2), torch.device("cuda"))
    assert reason == "needs 2 GPUs; 1 present"
    assert unmet_requirements(Requirements(ranks=2), torch.device("cpu")) is None
    assert "CUDA" in unmet_requirements(Requirements(gpus=2), torch.device("cpu"))


def test_the_agent_launches_ranks_without_initialising_cuda(monkeypatch, tmp_path):
    """torchrun's agent runs in the worker: a compute-capability query there would give it a CUDA
    context of its own on GPU 0 for the whole run. It checks the rest; the ranks check capability."""
    def initialises_cuda(*_):
        raise AssertionError("the agent initialised CUDA")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_capability", initialises_cuda)
    needs = Requirements(gpus=2, min_compute_capability=(9, 0))
    assert unmet_requirements(needs, torch.device("cuda"), capability=False) is None
    with pytest.raises(AssertionError, match="initialised CUDA"):  # what the agent no longer does
        unmet_requirements(needs, torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (8, 0))
    assert unmet_requirements(needs, torch.device("cuda")) == "needs compute capability 9.0; this GPU has 8.0"

    monkeypatch.setattr(torch.cuda, "get_device_capability", initialises_cuda)
    workload = distributed.Workload(requires=needs)
    monkeypatch.setattr(distributed, "load_benchmark", lambda _: type("Pair", (), {"workload": workload}))
    monkeypatch.setattr(distributed, "pick_device", lambda _: torch.device("cuda"))
    monkeypatch.setattr(distributed, "run_ranks", lambda spec, ranks, result: 40 + ranks)
    monkeypatch.delenv(distributed.AGENT_PID_ENV, raising=False)
    with pytest.raises(SystemExit) as launched:
        distributed.relaunch_if_needed(tmp_path / "p.py", RunOptions(), lambda _: None, "spec.json", tmp_path / "r")
    assert launched.value.code == 42


def test_world_size():
    assert Requirements().world_size == 1
    assert Requirements(gpus=2).world_size == 2
    assert Requirements(ranks=4).world_size == 4


def test_launch_keeps_nvlink_multicast_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = distributed.launch_env()
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env[distributed.AGENT_PID_ENV] == str(os.getpid()) and env[distributed.PARENT_PID_ENV] == ""
    args = distributed.launch_args("/x/spec.json", 2)
    assert args == ["--standalone", "--nproc-per-node=2", "--start-method=fork", "--run-path",
                    distributed.WORKER_SCRIPT, "/x/spec.json"]
    assert Path(distributed.WORKER_SCRIPT) == Path(worker.__file__)
    parsed = get_args_parser().parse_args(args)  # torchrun's own parser accepts them
    assert parsed.standalone and parsed.nproc_per_node == "2" and parsed.start_method == "fork"
    assert parsed.run_path and not parsed.module and parsed.training_script == distributed.WORKER_SCRIPT
    _, cmd, cmd_args = config_from_args(parsed)  # a function run in each forked rank: the start method applies
    assert cmd is run_script_path and cmd_args == [distributed.WORKER_SCRIPT, "/x/spec.json"]
    args = distributed.launch_args("/x/spec.json", 2, fork=False)
    assert args == ["--standalone", "--nproc-per-node=2", "-m", "aisp.harness.worker", "/x/spec.json"]
    parsed = get_args_parser().parse_args(args)
    assert parsed.standalone and parsed.nproc_per_node == "2" and parsed.module and parsed.start_method == "spawn"


def _launched(monkeypatch, tmp_path) -> list:
    """The arguments run_ranks gives torchrun (whose run is stubbed); this process's environment as it was after."""
    import torch.distributed.run as torchrun

    for key in distributed.launch_env():
        monkeypatch.delenv(key, raising=False)
    seen = []
    monkeypatch.setattr(torchrun, "run", seen.append)
    assert distributed.run_ranks("/x/spec.json", 2, tmp_path / "result.json") == 0
    return seen


def test_the_ranks_are_forked_from_the_agent_where_a_fork_works(monkeypatch, tmp_path):
    monkeypatch.setattr(distributed, "fork_poisoned", lambda: False)
    (args,) = _launched(monkeypatch, tmp_path)
    assert args.start_method == "fork" and args.run_path and args.training_script == distributed.WORKER_SCRIPT
    assert args.training_script_args == ["/x/spec.json"]


def test_the_ranks_start_as_new_pythons_where_a_fork_could_not_use_cuda(monkeypatch, tmp_path):
    """The agent queried the CUDA driver (or started torch's CPU threads): ranks forked from it could not
    work, so each is a new Python, as before the ranks were forked."""
    monkeypatch.setattr(distributed, "fork_poisoned", lambda: True)
    (args,) = _launched(monkeypatch, tmp_path)
    assert args.start_method == "spawn" and not args.run_path and args.module
    assert args.training_script == "aisp.harness.worker" and args.training_script_args == ["/x/spec.json"]


def test_each_rank_is_forked_from_the_agent_and_starts_as_a_new_one_would(suite):
    """Each rank's parent is the agent, and the pair's module in it is the one the agent imported
    before the launch (its IMPORTED_BY is the agent's PID: a rank started as a new Python imports it
    itself). Set as a new rank: SIGTERM's default action (not torchrun's handler) and torch's threads
    from OMP_NUM_THREADS, or the CPU share's. Both kinds of agent: one forked from the zygote
    (slow_rank), one started as a new Python (rank_hangs)."""
    _, _, pid_dir = suite
    # With torch built for CUDA the agent asked the driver as it loaded the pair (a Benchmark's default
    # device), so the ranks start as new Pythons, each importing the module itself (on 2 x H200)
    forked = not torch.backends.cuda.is_built()
    for pair in ("SlowGather", "PidReduce"):
        facts = [json.loads(p.read_text()) for p in sorted(pid_dir.glob(f"{pair}.rank*.json"))]
        assert len(facts) == 2, pair
        assert facts[0]["agent"] == facts[1]["agent"] and facts[0]["pid"] != facts[1]["pid"]
        for rank in facts:
            assert rank["ppid"] == rank["agent"] != rank["pid"], (pair, rank)
            assert rank["imported_by"] == (rank["agent"] if forked else rank["pid"]), (pair, rank)
            assert rank["sigterm_default"], (pair, rank)
            assert rank["threads"] == int(rank["share_env"] or rank["omp_env"]), (pair, rank)
