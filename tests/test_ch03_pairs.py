"""Chapter 3 pairs on the CPU: each passes the harness's verification (two seeds, inputs untouched,
fresh outputs) and measures the host effect it names; the CUDA-only pair says why it skips."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.execute import run_variants
from aisp.harness.loader import load_benchmark
from aisp.harness.options import RunOptions

CH03 = Path(__file__).resolve().parents[1] / "ch03"
CPU_PAIRS = ["numa_unaware", "docker", "kubernetes", "hugepages"]


@pytest.fixture(autouse=True)
def ch03_modules():
    """Other chapters reuse these module names (ch01 has baseline_gemm): import ch03's, then restore."""
    names = {p.stem for p in CH03.glob("*.py")}
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n in names}
    path = list(sys.path)
    sys.path.insert(0, str(CH03))
    yield
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(saved)
    sys.path[:] = path


def bench(name: str, seed: int = 0):
    b = load_benchmark(CH03 / f"{name}.py")
    b.device, b.seed = torch.device("cpu"), seed
    return b


@pytest.mark.parametrize("pair", CPU_PAIRS)
def test_pair_verifies_on_cpu(pair: str) -> None:
    paths = [CH03 / f"baseline_{pair}.py", CH03 / f"optimized_{pair}.py"]
    variants, _, skip = run_variants(paths, RunOptions(device="cpu", verify_only=True))
    assert skip is None
    assert variants[1].verdict == "pending", variants[1].reason  # verified on two seeds, not failed
    assert any("matches baseline" in c for c in variants[1].evidence.checks)


@pytest.mark.parametrize("pair", ["numa_unaware", "docker", "hugepages"])
def test_pairs_that_make_their_inputs_in_run_say_why(pair: str) -> None:
    """No per-call inputs to refill (the loader decodes, the buffer is mapped inside run()): each
    states ``inputs = ()`` with the workload's reason, so its result reads ok-unchecked with it."""
    for kind in ("baseline", "optimized"):
        b = bench(f"{kind}_{pair}")
        assert type(b).inputs == () and "inside the call" in b.workload.no_inputs_reason


def test_gemm_needs_cuda() -> None:
    reason = unmet_requirements(bench("baseline_gemm").workload.requires, torch.device("cpu"))
    assert reason is not None and "CUDA" in reason


@pytest.mark.parametrize("name", [f"{kind}_{pair}" for pair in CPU_PAIRS + ["gemm"]
                                  for kind in ("baseline", "optimized")])
def test_docstring_has_the_four_lines(name: str) -> None:
    doc = sys.modules[type(bench(name)).__module__].__doc__
    for key in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert key in doc, (name, key)


def test_docker_baseline_fits_dockers_default_shm_and_optimized_needs_more(monkeypatch) -> None:
    base, opt = bench("baseline_docker"), bench("optimized_docker")
    import baseline_docker

    assert baseline_docker.in_flight_bytes(base.workers, base.prefetch) <= baseline_docker.DOCKER_DEFAULT_SHM
    assert opt.workers * opt.prefetch > base.workers * base.prefetch
    with pytest.raises(ValueError, match="64 MiB"):
        base.check_shm(baseline_docker.DOCKER_DEFAULT_SHM + 1)

    class Tiny:
        f_bavail, f_frsize = 16, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Tiny())
    with pytest.raises(RuntimeError, match="--shm-size"):
        opt.setup()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_kubernetes_neighbours_run_only_during_run_and_die_at_teardown() -> None:
    opt = bench("optimized_kubernetes")
    opt.setup()
    try:
        pids = [p.pid for p in opt.neighbours]
        assert pids and all(_state(pid) == "T" for pid in pids)
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > opt.workload.pod_cpus:
            exclusive = set(opt.cores)
            assert all(not exclusive & os.sched_getaffinity(pid) for pid in pids)
        before = os.sched_getaffinity(0)
        opt.run()
        assert os.sched_getaffinity(0) == before  # binding undone after run()
        assert all(_state(pid) == "T" for pid in pids)
    finally:
        opt.teardown()
    assert not any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in pids)


def test_hugepages_counts_faults() -> None:
    base = bench("baseline_hugepages")
    base.setup()
    m = base.metrics()
    assert m["minor_faults_per_run"] >= (512 << 20) // 4096 * 0.9 and m["huge_page_mib"] == 0
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("THP is off here: MADV_HUGEPAGE cannot get huge pages")
    opt = bench("optimized_hugepages")
    opt.setup()
    m = opt.metrics()
    assert m["huge_page_mib"] > 0 and m["minor_faults_per_run"] < (512 << 20) // 4096 / 10


def test_hugepages_setup_needs_no_device_generator() -> None:
    base = bench("baseline_hugepages")
    base.device = torch.device("cuda")  # its buffer is host memory: setup must not build a CUDA generator
    base.setup()
    assert 1 <= base.value < 255


def test_numa_binding_is_undone_after_run() -> None:
    opt = bench("optimized_numa_unaware")
    opt.setup()
    try:
        before, threads = os.sched_getaffinity(0), torch.get_num_threads()
        opt.run()
        assert os.sched_getaffinity(0) == before and torch.get_num_threads() == threads
        m = opt.metrics()
        assert m["staging_local_fraction"] > 0.5 and m["numa_nodes"] >= 1
    finally:
        opt.teardown()


def test_neighbour_dies_with_its_parent() -> None:
    # The pair's NEIGHBOUR text, handed to the parent as its argument: a parent that imported the pair
    # file would spend seconds of CPU importing torch before starting it.
    from baseline_kubernetes import NEIGHBOUR

    parent = subprocess.Popen([sys.executable, "-c",
                               "import os, subprocess, sys, time; "
                               "p = subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid())]); "
                               "print(p.pid, flush=True); "
                               "time.sleep(60)", NEIGHBOUR], cwd=CH03, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60  # a bound for a broken test only: the neighbour may still be starting its Python
    while time.monotonic() < deadline:
        if not Path(f"/proc/{child}").exists() or _state(child) == "Z":
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or _state(child) == "Z"
