"""ch04:device_initiated_put_multigpu on the CPU: the workload's accounting and limits; NVSHMEM found
or the pair skipped with the reason; nvshmem_ring.cu compiled and linked for sm_90 against the wheel
and loaded (its argument checks answer without a GPU); the host-driven ring on two gloo ranks equals
the ring computed in one process on every rank, a ring that loses a hop fails, every rank joins
NVSHMEM with rank 0's unique id, and the P2P check agrees across ranks. On two GPUs: the pair through the harness."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import REPO

import aisp
from aisp.harness.execute import describe_error
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH04 = REPO / "ch04"
BASE = import_module_at(CH04 / "baseline_device_initiated_put_multigpu.py")
NVSHMEM = import_module_at(CH04 / "ch04_nvshmem.py")


def test_accounting_counts_every_hop_of_the_ring() -> None:
    w = BASE.WORKLOAD
    assert w.messages == 127 and w.items == 127 and w.bytes == 127 * 32768 and w.link == "nvlink"
    assert w.requires.world_size == 2 and "nvcc" in w.requires.executables
    for bad in ({"rounds": 1}, {"world": 1}, {"width": 0}):
        with pytest.raises(ValueError, match="a ring needs"):
            replace(w, **bad)


def test_without_nvshmem_the_pair_is_skipped_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr(NVSHMEM, "nvshmem_home", lambda: None)
    with pytest.raises(aisp.Unavailable) as err:
        NVSHMEM.load(torch.device("cuda"))
    assert describe_error(err.value, False) == ("skipped", NVSHMEM.MISSING)


def no_nvidia_namespace(name: str) -> None:
    raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}")


def test_nvshmem_is_found_from_its_home_or_the_wheel(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(NVSHMEM.importlib.util, "find_spec", no_nvidia_namespace)
    monkeypatch.setenv("NVSHMEM_HOME", str(tmp_path))
    assert NVSHMEM.nvshmem_home() is None  # an empty prefix, and no nvidia namespace
    for part in ("include/nvshmem.h", "lib/libnvshmem_device.a", "lib/libnvshmem_host.so.3"):
        (tmp_path / part).parent.mkdir(exist_ok=True)
        (tmp_path / part).touch()
    assert NVSHMEM.nvshmem_home() == tmp_path
    flags = NVSHMEM.ring_library(tmp_path).flags
    assert "-rdc=true" in flags and "-lnvshmem_device" in flags and "-l:libnvshmem_host.so.3" in flags


def test_ring_status_codes_say_what_failed() -> None:
    with pytest.raises(RuntimeError, match="NVSHMEM_SYMMETRIC_SIZE"):
        NVSHMEM.check(1002, "ring_alloc")
    with pytest.raises(RuntimeError, match="status 1"):
        NVSHMEM.check(1, "ring_run")
    NVSHMEM.check(0, "ring_run")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_kernels_build_for_sm90_and_link_against_nvshmem() -> None:
    BASE.STAGE.build("90")
    home = NVSHMEM.nvshmem_home()
    if home is None:
        pytest.skip(NVSHMEM.MISSING)
    built = NVSHMEM.ring_library(home).build("90")
    lib = ctypes.CDLL(str(built))  # loads without a GPU: the CUDA runtime starts on first use
    for name, argtypes in NVSHMEM.SIGNATURES.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, ctypes.c_int
    assert lib.ring_uid_size() == 128 and lib.ring_ready() == 0
    assert lib.ring_run(None, None, None, None, None, 8, 1, 1, None) == 1  # cudaErrorInvalidValue: rounds < 2
    assert lib.ring_run(None, None, None, None, None, 8, 2, 1, None) == 1001  # not initialized
    host = next((home / "lib").glob("libnvshmem_host.so*"))
    defined = subprocess.run(["nm", "-D", "--defined-only", str(host)], capture_output=True, text=True).stdout
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(built)], capture_output=True, text=True).stdout
    wanted = [line.split()[-1].split("@")[0] for line in undefined.splitlines() if "@NVSHMEM" in line]
    assert wanted and all(f" {name}@" in defined for name in wanted), wanted
    if native.cuobjdump() is not None:  # linked with NVSHMEM's device code, 1024 threads must still fit an SM
        usage = NVSHMEM.ring_library(home).resource_usage("90")
        assert int(re.search(r"ring_kernel\w*:\s+REG:(\d+)", usage).group(1)) <= 64


@pytest.fixture(scope="module")
def ranked(tmp_path_factory) -> list[dict]:
    """tests/ring_check.py on two gloo ranks; each rank's report."""
    out = tmp_path_factory.mktemp("ring")
    script = Path(__file__).with_name("ring_check.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script), str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(CH04), str(REPO / "tests")])})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_host_driven_ring_matches_the_ring_in_one_process(ranked) -> None:
    for report in ranked:
        assert report["ring"].get("error") is None and report["ring"]["driven"], report["ring"]


def test_a_ring_that_loses_a_hop_fails_on_every_rank(ranked) -> None:
    assert all("outside tolerance" in report["lost_hop"]["error"] for report in ranked)


def test_every_rank_joins_nvshmem_with_rank_0s_unique_id(ranked) -> None:
    assert [report["join"] for report in ranked] == [["rank 0's id", 0, 2], ["rank 0's id", 1, 2]]


def test_one_unreachable_peer_makes_every_rank_skip_and_free(ranked) -> None:
    assert all(report["p2p"] == [NVSHMEM.UNREACHABLE, True] for report in ranked)


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_pair_verifies_on_two_gpus(tmp_path) -> None:
    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite

    options = RunOptions(iterations=5, warmup=2, artifacts_dir=tmp_path)
    (result,) = run_suite(resolve_targets(["ch04:device_initiated_put_multigpu"], REPO), options)[0]
    (opt,) = result["variants"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]
    assert "each of 2 ranks: matches that rank's baseline" in opt["verification"]["checks"]
