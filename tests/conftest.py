"""Shared test setup: a GPU marker that skips without CUDA; a chapter's (baseline, optimized) modules."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from aisp.harness.discovery import Pair, pairs_in, resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import Hooks, run_suite
from aisp.harness.scheduler import Hint

REPO = Path(__file__).resolve().parent.parent
FIXTURE_PAIRS = Path(__file__).resolve().parent / "fixtures" / "pairs"


def _share_the_cores_among_xdist_workers() -> None:
    """Under ``pytest -n N`` each worker's torch uses its share of the cores (cores // N threads), as
    do the processes it starts that read OMP_NUM_THREADS (the harness's workers get the runner's own
    explicit share, as in any run). With two 2-thread workers on CI's two cores, each small op waited
    ~10 ms for the other pool thread's core: tests/test_tolerance.py took 96 s under -n 2, 40 s with
    one thread a worker."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


_share_the_cores_among_xdist_workers()


@pytest.fixture(autouse=True, scope="session")
def _cuobjdump_read_once_a_library() -> Iterator[None]:
    """``cuobjdump -sass``/``-res-usage`` of a native library read once a process for each build of
    it (its name, target architecture and cache key: nvcc's version, the flags and every source's
    bytes, what names its ``.so``): a reading takes 1-2 s here, and a module's tests read the same
    library's SASS again and again (ch07's tiled_matmul four times, ch11's kernels four). A library
    whose key or target raises, or with no cuobjdump, goes to the real call as before."""
    from aisp.kits import native

    read = native.Library._cuobjdump
    seen: dict[tuple[str, ...], str] = {}

    def cached(self: native.Library, arch: str, option: str) -> str:
        tool = native.cuobjdump()
        try:
            key = (tool, self.name, option, self.target(arch), self.key(self.target(arch)))
        except Exception:
            return read(self, arch, option)
        if tool is None:
            return read(self, arch, option)
        if key not in seen:
            seen[key] = read(self, arch, option)
        return seen[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native.Library, "_cuobjdump", cached)
        yield


def shared_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary folder that every xdist worker of it sees (the workers' common parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def _session_native_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_temp(tmp_path_factory) / "native-fresh"


@pytest.fixture
def fresh_native_cache(_session_native_folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """AISP_NATIVE_CACHE set to this session's own folder of built libraries (empty when the session
    starts, shared by its tests and its xdist workers; aisp.kits.native builds under a file lock and
    renames into place): each library is built by this session's nvcc, and once however many tests ask
    for it. A tmp_path cache a test built ch11's fma_chain library in four times (2-3 s of nvcc each)."""
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(_session_native_folder))
    return _session_native_folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "multigpu" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported: their objects (torch's, the harness's, the chapters') go to gc's
    permanent generation, as the harness's worker and zygote freeze theirs after their imports. The
    harness's in-process timing and verification call gc.collect() around each setup and timed window;
    each call walked all of them (0.1-0.45 s here: tests/test_timing.py's rotation test, sixteen
    interleaved timings of two empty calls, took 7 s of it). Objects made later are collected as before.
    Hypothesis is imported first where installed: its plugin hook registers trio's generator, and then
    looks for that generator's referrers, which gc does not search among frozen objects (a warning)."""
    import gc
    import importlib.util

    if importlib.util.find_spec("hypothesis") is not None:
        import hypothesis  # noqa: F401
    gc.collect()
    gc.freeze()


FORKED_AND_REUSED_PAIRS = ["aborts", "constant", "good", "mutates_input", "raises", "wrong_shape"]
"""The fixture pairs (right, wrong, crashing, raising) that the --reuse-workers and --fork-workers tests
run in their mode and hold to the spawned run's results (:func:`spawned_fixture_pairs`)."""
FORKED_AND_REUSED_OPTIONS = dict(iterations=3, warmup=1, warmup_s=0.0, device="cpu", confirm_runs=0)


def by_name(results: list[dict]) -> dict[str, dict]:
    """A run's results by pair name, as its summary stores them (JSON: tuples become lists)."""
    return {r["name"]: r for r in json.loads(json.dumps(results, default=str))}


def run_named_pairs(folder: Path, names: list[str], options: RunOptions) -> dict[str, dict]:
    """The named pairs of a fixture folder through the real harness, by name (:func:`by_name`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
        results, _ = run_suite(resolve_targets([f"{folder.name}:{n}" for n in names], folder, (folder,)), options)
    return by_name(results)


def fix_the_check_plan(mp: pytest.MonkeyPatch) -> None:
    """The same verification plan in every run (it is drawn at random per pair), so evidence can be compared."""
    from aisp.harness.verify import CheckPlan

    mp.setattr(CheckPlan, "draw", classmethod(lambda cls, seed, iterations: cls(seed + 11, 5, 1)))


@pytest.fixture(scope="session")
def spawned_fixture_pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """:data:`FORKED_AND_REUSED_PAIRS` through the default harness (a spawned worker a pair, the fixed
    check plan), run once for the whole session: tests/test_reuse_workers.py and tests/test_fork_workers.py
    each ran this same run (same pairs, options and plan) to compare their mode with, six worker starts of
    ~4 CPU-s each. Under xdist the first worker to ask runs it and the other reads its results (a lock)."""
    from filelock import FileLock

    stored = shared_temp(tmp_path_factory) / "spawned_fixture_pairs.json"
    with FileLock(str(stored) + ".lock"):
        if not stored.exists():
            with pytest.MonkeyPatch.context() as mp:
                fix_the_check_plan(mp)
                results = run_named_pairs(FIXTURE_PAIRS, FORKED_AND_REUSED_PAIRS,
                                          RunOptions(**FORKED_AND_REUSED_OPTIONS,
                                                     artifacts_dir=Path(tmp_path_factory.mktemp("spawned"))))
            stored.write_text(json.dumps(results))
        return json.loads(stored.read_text())


def good_pair_folder(tmp_path: Path) -> Path:
    """``tmp_path/mine``: a folder of one's own pairs (``--root``) holding the fixture pair ``good``."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("baseline_good.py", "optimized_good.py", "common_pairs.py"):
        shutil.copy(FIXTURE_PAIRS / name, mine / name)
    return mine


def variant_modules(folder: Path) -> list[tuple[str, str]]:
    """(baseline module, optimized module) for every optimized file in ``folder``, matched as the
    harness's discovery matches them (the longest baseline name)."""
    return [(pair.baseline.stem, opt.stem) for pair in pairs_in(folder) for opt in pair.optimized]


def rank_hints(pairs: list[Pair], ranks: int) -> Hooks:
    """The runner's hooks with ``ranks`` as each pair's GPU count, the hint that expectation files
    recorded on a GPU host give a multi-rank pair (aisp.suite.pair_hints): the runner then splits its
    CPU share among the ranks (one thread a rank on CI's two cores). Without a hint each rank gets
    every core's threads, and two ranks' thread pools on two cores made a tiny DDP step take 300 ms
    instead of 17 (tests/test_ch20_ddp.py's pair 33 -> 10 s)."""
    return Hooks(hints={pair.slug: Hint(gpus=ranks) for pair in pairs})


def run_fixture_pairs(fixtures: Path, chapter: Path, options: RunOptions, ranks: int = 1) -> list[dict]:
    """Every pair in the ``fixtures`` folder through the real harness (multi-rank ones under
    torchrun, hinted as ``ranks`` ranks: :func:`rank_hints`), with the ``chapter`` folder on the
    workers' PYTHONPATH; the results."""
    pairs = resolve_targets([], fixtures, (fixtures,))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(chapter), os.environ.get("PYTHONPATH")])))
        results, _ = run_suite(pairs, options, hooks=rank_hints(pairs, ranks))
    return results


def built_on_cuda(path: Path, seed: int = 0):
    """The benchmark of the pair file at ``path``, set up on CUDA with ``seed`` (a pytest skip with
    the reason where it raises ``aisp.Unavailable``)."""
    import aisp
    from aisp.harness.loader import import_module_at

    bench = import_module_at(path).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    try:
        bench.setup()
    except aisp.Unavailable as err:
        pytest.skip(f"{path.stem}: {err}")
    return bench


def assert_replay_follows_new_tokens(bench, workload) -> None:
    """A benchmark whose call is a CUDA graph captured in setup (``aisp.kits.graphs.GraphReplay``):
    replayed after new tokens are written into its ``x`` in place, it gives what the eager
    ``forward()`` gives for them (``workload``'s tolerance)."""
    from aisp.harness.verify import compare, detach_copy

    assert bench.graph is not None
    bench.x.copy_(bench.x.roll(1, 0) * 0.5)
    replayed = detach_copy(bench.run())
    compare(detach_copy(bench.forward()), replayed, workload)


def verify_stages_on_cuda(folder: Path, baseline: str, stages: list[str]) -> None:
    """Each stage's output against the baseline's, one benchmark on the GPU at a time (the pair's
    tolerance; the errors are printed)."""
    from aisp.harness.execute import guarded_run
    from aisp.harness.verify import compare

    base = built_on_cuda(folder / f"{baseline}.py")
    ref, workload = guarded_run(base), base.workload
    base.teardown()
    del base
    for module in stages:
        bench = built_on_cuda(folder / f"{module}.py")
        evidence = compare(ref, guarded_run(bench), workload)
        print(module, evidence.max_abs_err, evidence.rel_l2_err)
        bench.teardown()
        del bench
        torch.cuda.empty_cache()
