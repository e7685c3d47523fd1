"""``aisp profile run`` on a pair of several ranks: every rank profiled in step through torchrun (two
gloo ranks on the CPU here), rank 0's summary with every rank's figures; tools that would profile a
world of one rank refuse; a failing rank is an error, not a hang."""

from __future__ import annotations

from pathlib import Path

from aisp.cli.profile import _per_rank, _side_by_side
from aisp.profile.pair import ProfileRequest, _profile_ranks, ranks_needed
from aisp.profile.ranks import launch, merge

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed"


def _files(name: str) -> dict[str, Path]:
    return {"baseline": FIXTURES / f"baseline_{name}.py", "optimized": FIXTURES / f"optimized_{name}.py"}


def _summary(window_us: float, kernel_us: float = 0.0) -> dict:
    return {"window_us": window_us, "kernel_us": kernel_us, "gpu_busy_fraction": None, "profiled_iterations": 2}


def test_merge_keeps_rank_0s_summary_and_adds_every_ranks_figures():
    per_rank = [{"baseline": _summary(100.0, 40.0), "optimized": {"skipped": "needs nvcc"}},
                {"baseline": _summary(180.0, 60.0), "optimized": {"skipped": "needs nvcc"}}]
    merged = merge(per_rank)
    assert merged["optimized"] == {"skipped": "needs nvcc"}
    assert merged["baseline"]["window_us"] == 100.0  # rank 0's
    assert [(r["rank"], r["window_us"], r["kernel_us"]) for r in merged["baseline"]["ranks"]] == [
        (0, 100.0, 40.0), (1, 180.0, 60.0)]
    assert _per_rank(merged["baseline"]) == "r0 0.050 / r1 0.090 ms"


def test_two_ranks_are_profiled_in_step_each_with_its_own_trace(tmp_path):
    assert ranks_needed(FIXTURES / "baseline_slow_rank.py") == (2, None)  # gloo on this CPU: it can run
    found = launch(_files("slow_rank"), 2, tmp_path, iterations=2, warmup=1, timeout_s=240)
    assert set(found) == {"baseline", "optimized"}, found
    for name, summary in found.items():
        assert "error" not in summary, (tmp_path / "ranks.log").read_text()
        assert [r["rank"] for r in summary["ranks"]] == [0, 1]
        assert all(r["window_us"] > 0 for r in summary["ranks"])
        for rank in (0, 1):
            assert (tmp_path / f"rank{rank}" / f"{name}.trace.json").stat().st_size > 0
    table = _side_by_side(found)
    assert "window per iteration, each rank" in table.columns[0]._cells


def test_a_rank_that_raises_makes_every_variant_an_error(tmp_path):
    found = launch(_files("rank_raises"), 2, tmp_path, iterations=1, warmup=1, timeout_s=240)
    assert all("torchrun exited with" in v["error"] for v in found.values()), found
    assert "deliberate failure on rank 1" in (tmp_path / "ranks.log").read_text()


def test_tools_that_would_see_a_world_of_one_rank_refuse(tmp_path):
    files = _files("slow_rank")
    refused = _profile_ranks(ProfileRequest("x:y", "ncu"), files, tmp_path, 2, None)
    assert all("world of one: use --tool torch" in v["skipped"] for v in refused.values())
    unmet = _profile_ranks(ProfileRequest("x:y", "torch"), files, tmp_path, 2, "needs 2 GPUs; 1 present")
    assert unmet == {name: {"skipped": "needs 2 GPUs; 1 present"} for name in files}


def test_a_profiled_bench_run_profiles_every_rank_of_a_multi_rank_pair(tmp_path):
    """`aisp bench run --profile minimal` on two gloo ranks: each rank captures every standing variant in
    step after timing; rank 0's capture is the pair's profile, rank 1's sits in profiles/rank1."""
    from dataclasses import replace

    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite
    from aisp.harness.scheduler import Hint
    from aisp.suite import hooks_for

    pairs = [p for p in resolve_targets([], FIXTURES, (FIXTURES,)) if p.name == "slow_rank"]
    options = RunOptions(iterations=4, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path,
                         profile="minimal")
    hooks = replace(hooks_for(options), hints={pairs[0].slug: Hint(gpus=2)})
    (result,), run_dir = run_suite(pairs, options, hooks=hooks)
    assert result["verdict"] in ("ok-unchecked", "slower"), result["reason"]
    assert result["telemetry"]["ranks"]["profile"].startswith("every rank profiled in step")
    assert set(result["profile"]["variants"]) == {"baseline_slow_rank", "optimized_slow_rank"}
    rank1 = run_dir / pairs[0].slug / "profiles" / "rank1"
    assert (rank1 / "profile_summary.json").exists()
    assert (rank1 / "optimized_slow_rank.trace.json").stat().st_size > 0


def test_profile_full_leaves_nsight_out_of_a_multi_rank_pair(tmp_path):
    """ncu and nsys run a variant's file as one process, a world of one rank: --profile full says so
    for a multi-rank pair instead of profiling that other program."""
    from aisp.harness.runner import PairContext
    from aisp.profile.pair import attach_profile

    best = {"name": "optimized_x", "file": str(FIXTURES / "optimized_slow_rank.py")}
    result = {"best": "optimized_x", "variants": [best], "workload": {"requires": {"gpus": 1, "ranks": 2}}}
    out = attach_profile(result, PairContext({}, tmp_path), nsight=True)
    assert out["profile"]["nsight"]["ncu"]["skipped"].startswith("runs as 2 ranks")
    assert out["profile"]["nsight"]["nsys"] == out["profile"]["nsight"]["ncu"]
    single = {**result, "workload": {"requires": {"gpus": 1, "ranks": 1}}}
    assert "runs as" not in str(attach_profile(single, PairContext({}, tmp_path), nsight=True)["profile"]["nsight"])
