"""The package's shape: import rules (import-linter contracts in pyproject.toml), no chapter
imported from the package, and the harness core's size budget. Each rule is also shown to fire on
a planted violation in a copy of the package."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS_BUDGET_LINES = 5940  # 2,500; 2,520 for the checked call's refill (2026-11-26); 2,550 for torchrun run in the worker (2026-11-27); 2026-11-28: +40 for the Workload's latency counts and ceiling note, +280 for issue 27 items 1, 2, 6, 7 (the device-work window, issue times, sync tails, host-bound tag, --timing graph, reserved and NVML memory), +500 for issue 28 (--gpus: the scheduler and CPU shares, --shard, phases), +50 for the verdicts inconclusive and ok-unchecked (issue 27 items 4, 5, 9), +150 for the tolerance rules (tolerance.py: the tail test in units of rounding, the differential test against a reference), +10 for spawn's module (aisp check's worker), +25 for artifact file modes; +50 for issue 29 (host.py: host readings and the busy rule; the runner's re-run hook; NVLinks and the diff hash in the fingerprint); +50 for the empty-call sync tails and the phase announcements to the display; +350 for --reuse-workers (isolation.py: what a reused worker puts back between pairs, random generators included; the worker's serve loop; the runner's pool); +25 for the multi-GPU flops/bytes convention (Workload docstrings, world_size of a stored workload) and the Workload window check; +10 for the worker files, environment and no-result reason shared by spawn and the reuse pool (documented helpers instead of two copies); +10 for the paired sync tail (the repeated sync subtracted, per call) and its reasons; +35 for host.py remembering the run's own workers (NVML lists one after it exited: 8 false busy pairs in a whole-book run on 4 x H200) and the suite deadline measured from a pair's start, with its own reason; +100 for streams.py (work left on other streams read from the GPU's own timestamps in one profiled untimed call: the sync tail cannot see a 30 us spin left behind a 30 us call) and its rule; +10 for the profiled call only where it adds to the tail rule (calls under 0.2 ms); +220 for --fork-workers (zygote.py: one process imports torch and the harness and forks each pair's fresh worker; the runner's fallback to a new Python): 4.8 s a pair of start on 4 x H200, 30% of the book's worker time; +10 for the zygote's start limit; +25 for the spacer before streams.py's profiled call (without it a 30 us hidden tail read 0 us on an H200) and its coverage check; +55 for the starved-pair rule (host.py: the worker's threads' run-queue wait from schedstat over the timed iterations: two runs at once took ch16:gpu_sampling's baseline 27x slower while the load average read 1.7 before it); +10 for the pair's reason naming the variant its inconclusive or slower verdict comes from (ch01:performance read 'inconclusive' with only its skipped variants' reasons); +5 for gc.freeze() after the worker's and the zygote's imports (each pair's gc.collect() calls walked torch's objects: 0.4 s a pair on a CPU) and the loader listing a folder once; +60 for the spacer that grows when a sample's issue outran it (a busy host starved the GPU inside the window in 14 of 20 samples of ch19:fp8_delayed_scaling on 4 x H200), and the sync-debug-mode check that keeps a call waiting on its own device work (ch19:fp8_moe's .tolist()) out of that rule; +20 for ending a timed-out worker's token carriers that init adopted (a sleeper started as the worker was stopped outlived it once in a full run); +10 for the host links of Workload.link (host_memory, page_cache, page_faults: their docstring, the LINKS tuple and the check that rejects an unknown link at load instead of pricing it as HBM); +10 for the SIMT precisions of Workload.precision (fp32_simt, fp16_simt: the PRECISIONS tuple, their number formats for the tolerance, and the check that rejects an unknown precision at load instead of pricing it as fp32); +15 for names.py (the link and precision names without torch: the reports check them and aisp --help imports no torch); +90 for the sync-tail overrule (confirm_tails, tail_overruled: a host-timed tail of 13-21 us read two ch18 decode pairs as errors in a 4 x H200 book; GPU timestamps of 3 profiled calls decide) and beside_spacer_us (work on a never-waiting stream ran beside the profiled call's spacer, unseen: the under_spacer fixture passed every check on H200); +235 for --resume (resume.py: which stored results are final, the checks of selection, options, hardware and commit, the parts recorded in the manifest, the run folder's lock; the runner's part split out of run_suite); +20 for the zygote importing the compile stack (torch._dynamo, Inductor, Triton: 4-7 s of a compiling pair's import on 4 x H200) and Inductor's compile threads recounted on the child's CPU share; +15 for the zygote's poisoned-fork check (a child asked before any pair: an import that queries the CUDA driver broke every forked pair on an H200); +20 for profiling every rank of a multi-rank pair in a profiled run (the on_timed hook in step on every rank, rank R's capture in profiles/rank<R>; before, such a pair's profile said 'not captured'); +10 for four latency counts (device_launches, device_graph_launches, all_to_alls, while_iterations: the floors of aisp peak's device-launch, all-to-all and WHILE-pass probes); +45 for the memory peak's carried state (held_bytes: the gradients, optimizer moments and first-call buffers earlier calls left on a variant, which a call may free before it allocates anew: the pipeline pair's optimized rank read 252 MB where ~411 MB is right) and Workload.resident_bytes (the capacity ceiling of a memory-headline pair); +5 for the latency count dependent_fmas (the longest chain of dependent FMAs, priced at aisp peak's fma_dependent floor: ch11's 8-block FMA-chain kernels); +65 for proctree.py (a timed-out tool's process tree frozen with SIGSTOP before SIGKILL, shared by the all-reduce sweep and the profilers: a rank torchrun started between listing the tree and killing it outlived the kill and held its GPU); +25 for idle_tail_overruled (the calls from idle's sync tail confirmed by the GPU's timestamps, as the timed calls' already was: ch19:w4a16_gemm's one-stream kernel read 26 us over a 21 us allowance from idle in one of two H200 runs); +20 for taking again, in its slot, a sample whose call the host issued past the spacer's end while the spacer could still grow (its events timed the host: one such sample of ch19:w4a16_gemm's _tiled read 0.175 ms against 0.089-0.093 for the other 19 on 2 x H200, and ch18:mla_absorption's _wgmma lost the pair's best to _graph on that one sample's spread); +5 for HOST_LINKS moved from aisp/report/roofline.py into names.py (moved, not new: the judge's HOST_RATE_LINKS is derived from it instead of repeating its three names); +90 for the CUDA context's persisting-L2 set-aside in the settings watch (settings.py: torch's libcudart through ctypes, the limit read before each call and written back where a variant changed it, with the note): ch07:l2_persistence's optimized setup() left 33.75 of the 60 MiB set aside during the baseline's calls, which read 0.80 ms interleaved and 0.3753 ms alone on an H200; +130 for the baseline timed alone before any other variant's setup (execute.time_alone, stats.slowed_beside: a rank rule exact at 1% and a 10% margin; results.check_alone: the note, solo_ms, interference, and ok made inconclusive from 25% slower): ch07:l2_persistence's baseline read 0.80 ms interleaved and 0.3753 ms alone on an H200 for 6 days of stored runs, slowed by the optimized variant's setup(); +5 for keeping a host-bound baseline's speedups where it read slower beside the variants than alone (the host's load can differ between the two phases: a note, not inconclusive); +50 for memory outside torch's caching allocator (execute._outside_now over setup and the measured call; results.outside_excess: a memory-headline variant holding over 64 MiB more of it than its baseline is inconclusive, with a note, and ranks below the others for best; since 2026-11-30 that excess is added to its peak for the memory ratio instead, with the note: +5 for that, ch04:zero_sharding_multigpu reads 2.00x charged, not 2.75x): ch04:zero_sharding_multigpu's _pipelined variant keeps 268 MB+ in symmetric memory that its peak_bytes (1.07 GB) does not count; +5 for _sample_plan and _device_window, the calls-per-sample and spacer plan that the interleaved timing and the baseline's samples alone share (one copy, where time_alone had repeated its three lines); +35 for the SM clock read after each sample alone and over the timed samples (telemetry.clock_over, results.clock_scale): an H200's A/A matmul read 1.386 ms alone on a cool GPU and 1.538 interleaved at its power cap, a false flag without it; +20 for probe_streams, the profiled call of streams.py moved after the timed samples (the first run of torch's profiler in a process slows the calls right after it: ch01:cuda_graphs' graph replay 0.164 -> 0.253 ms, back within 2 s; the pair read 55% of its ceiling with the probe before its samples, 96% after); +15 for declared_names (a tensor set over inputs, scratch or state in setup() is refused with its name: the outside-memory fixture's self.scratch of 256 MiB made the checked call iterate its elements past the worker's 120 s limit); +5 for _can_trace, the one test of whether the GPU's timestamps can be read that probe_streams and confirm_tails shared as two copies; +35 for the wider margin of the alone check at a power cap (results.power_capped, stats.SLOWED_CAPPED_REL): an H200's A/A matmul read 1.12x slower interleaved than alone with its SM clock read 1,530 then 1,515 MHz, a false flag the clock scale could not explain; +24 for the host-link rule of the --gpus scheduler (Hint.host_link, _first_allowed: no two pairs over a host link at once; a 512 MiB first touch took 354 ms alone and 527 ms beside a 16-thread host memcpy on the other GPU's cores, 2 x H200); +43 for the host-speed probe (host.dispatch_us, read in each pair's worker after its timed samples, the slowest rank's for a multi-rank pair, carried into the result's host record; aisp peak's dispatch_torch_op calls it): the environment fingerprint cannot tell H200 hosts of one CPU model string apart, whose dispatch_torch_op read 3.45, 4.19 and 5.76 us, and a whole-book run on 2 x H200 flagged five host-bound or host-heavy pairs (ch05:uint8_transfer's baseline 50.32 ms against 26.76) while its GPU-bound baselines read as before; +11 for host.current_cpu beside the probe (the CPU it was read on, the slowest rank's for a multi-rank pair): on one 2 x H200 lease the probe read 5.0-5.6 us pinned to vCPU 16 and 3.0-3.6 on vCPUs 1 and 2, and a book's 157 readings fell in two groups (2.7-3.4 and 4.6-6.4 us); +9 for stats.row_medians (the bootstrap matrices' row medians from one sort, np.median's bit for bit: 2-7x faster at 8-40 samples a row; paired_ratio was half of tests/test_judge_simulation.py's time); +7 for timing.empty_tails (the empty calls' sync tails, one copy that the harness's probe window and aisp check's unjoined-stream check both call, instead of a list comprehension in each); +24 for stats.sorted_percentile (summarize's three quantiles from one sort, np.percentile's bit for bit: its generic path was most of a simulated book's judging); +32 for forking.py (the zygote's fork check shared with torchrun's agent, which forks the ranks next; it now also asks whether a child can run torch's CPU threads: once GNU OpenMP started its threads in the parent, a forked child's first parallel op hangs); +88 for ranks forked from torchrun's agent (distributed: --start-method fork --run-path worker.py, the ranks started as new Pythons where a fork is poisoned, every forked rank's exit status kept as torchrun reports only the first failure, often a killed rank's echo; a forked rank given the signals' default actions, its OMP_NUM_THREADS and seeds, returning its value to torchrun when it succeeded): tests/test_distributed.py 51 -> 25 CPU s on a 2-core host; +2 for saying in distributed.py that with torch built for CUDA the ranks start as new Pythons (loading the pair asks the driver: every agent fell back on 2 x H200)
CHAPTER_MODULE = re.compile(r"^ch\d\d")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter on the ``aisp`` package found in ``root`` (its pyproject's contracts)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache", "--config", str(root / "pyproject.toml")],
                          cwd=root, env=env, capture_output=True, text=True, check=False)


def chapter_imports(package: Path) -> list[str]:
    """``file:line module`` for every import of a chapter module (``ch01``, ``ch13_gpt``) in ``package``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(package.parent)}:{node.lineno} {n}" for n in names
                      if CHAPTER_MODULE.match(n)]
    return found


def harness_lines(harness: Path) -> int:
    """Physical lines of every module of the harness core."""
    return sum(len(p.read_text().splitlines()) for p in harness.glob("*.py"))


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "aisp", tmp_path / "aisp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_import_contracts_hold():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize("planted, contract", [
    ({"aisp/harness/planted.py": "from aisp.report import console\n"}, "The harness imports no tool"),
    ({"aisp/harness/planted.py": "def lazy():\n    import aisp.judge.expectations\n"}, "The harness imports no tool"),
    ({"aisp/report/planted.py": "import aisp.cli.main\n"}, "Tools and kits import no entry point"),
    ({"aisp/judge/planted.py": "import aisp.kits.gpt\n", "aisp/kits/planted.py": "import aisp.judge.proof\n"},
     "No import cycles"),
    ({"aisp/harness/planted_a.py": "import aisp.harness.planted_b\n",
      "aisp/harness/planted_b.py": "import aisp.harness.planted_a\n"}, "No import cycles"),
])
def test_a_planted_violation_breaks_its_contract(package_copy, planted, contract):
    for rel, text in planted.items():
        (package_copy / rel).write_text(text)
    proc = lint_imports(package_copy)
    assert proc.returncode != 0
    broken = [line for line in proc.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(line.startswith(contract) for line in broken), proc.stdout


def test_the_package_imports_no_chapter(package_copy):
    assert chapter_imports(REPO / "aisp") == []
    (package_copy / "aisp/kits/planted.py").write_text("def f():\n    from ch13_gpt import GPTConfig\n")
    (package_copy / "aisp/report/planted.py").write_text("import ch01.compare\n")
    assert chapter_imports(package_copy / "aisp") == ["aisp/kits/planted.py:2 ch13_gpt",
                                                      "aisp/report/planted.py:1 ch01.compare"]


def test_harness_core_within_its_size_budget(package_copy):
    lines = harness_lines(REPO / "aisp" / "harness")
    print(f"harness core: {lines} lines (budget {HARNESS_BUDGET_LINES})")
    assert lines <= HARNESS_BUDGET_LINES
    (package_copy / "aisp/harness/planted.py").write_text("x = 1\n" * (HARNESS_BUDGET_LINES - lines + 1))
    assert harness_lines(package_copy / "aisp" / "harness") > HARNESS_BUDGET_LINES
