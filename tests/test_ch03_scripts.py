"""The chapter's shell scripts: shellcheck-clean, check-only by default, --apply refused without
root, idempotent with root (against temporary /etc and fake /proc, /sys trees and stub commands)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CH03 = Path(__file__).parents[1] / "ch03"
FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"
SCRIPTS = ["system_tuning.sh", "numa_topology_script.sh", "cpu_gpu_numa_optimizations.sh", "gpu_setup_commands.sh"]
ROOT_ONLY = ["system_tuning.sh", "cpu_gpu_numa_optimizations.sh", "gpu_setup_commands.sh"]

NVIDIA_SMI = r"""#!/usr/bin/env bash
echo "nvidia-smi $*" >> "$STUB_LOG"
state="$STUB_DIR/pm0"
if [[ "$*" == *"-pm 1"* ]]; then touch "$state"; exit 0; fi
pm0=Disabled; [[ -f "$state" ]] && pm0=Enabled
case "$*" in
  *index,pci.bus_id,persistence_mode*) echo "0, 00000000:3B:00.0, $pm0"; echo "1, 00000000:86:00.0, Enabled" ;;
  *index,persistence_mode*) echo "0, $pm0"; echo "1, Enabled" ;;
  *index,pci.bus_id*) echo "0, 00000000:3B:00.0"; echo "1, 00000000:86:00.0" ;;
  *) echo "0, NVIDIA H200, 580.159.04, $pm0, Enabled, Disabled" ;;
esac
"""
SYSTEMCTL = r"""#!/usr/bin/env bash
echo "systemctl $*" >> "$STUB_LOG"
case "$1" in
  list-unit-files) exit 0 ;;
  is-enabled) [[ -f "$STUB_DIR/enabled" ]] && echo enabled || echo disabled ;;
  is-active) echo inactive ;;
  enable) touch "$STUB_DIR/enabled" ;;
esac
"""
LOGGER = '#!/usr/bin/env bash\necho "{name} $*" >> "$STUB_LOG"\n'
NUMACTL = '#!/usr/bin/env bash\necho "numactl $*" >> "$STUB_LOG"\nshift 2 2>/dev/null; exec "$@"\n'
MUTATING = ("-pm 1", "systemctl enable", "modprobe")


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in {"nvidia-smi": NVIDIA_SMI, "systemctl": SYSTEMCTL, "numactl": NUMACTL,
                       "modprobe": LOGGER.format(name="modprobe"), "modinfo": LOGGER.format(name="modinfo")}.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    root = tmp_path / "root"
    shutil.copytree(FIXTURE, root)
    return dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", STUB_DIR=str(stubs), STUB_LOG=str(tmp_path / "log"),
                ETC_DIR=str(tmp_path / "etc"), AISP_ROOT=str(root), SYSFS=str(root / "sys"), COLUMNS="200")


def run(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CH03 / script), *args], env=env, capture_output=True, text=True, timeout=120)


def log(env: dict[str, str]) -> str:
    path = Path(env["STUB_LOG"])
    return path.read_text() if path.exists() else ""


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    files = [f"ch03/{s}" for s in [*SCRIPTS, "tuning_lib.sh"]]
    res = subprocess.run(["shellcheck", "-x", *files], cwd=CH03.parent, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_check_mode_changes_nothing(script: str, sandbox: dict[str, str]) -> None:
    root = Path(sandbox["AISP_ROOT"])
    before = tree(root)
    res = run(script, sandbox)
    assert res.returncode == 0, res.stdout + res.stderr
    assert tree(root) == before
    assert not Path(sandbox["ETC_DIR"]).exists()
    assert not any(m in log(sandbox) for m in MUTATING), log(sandbox)


@pytest.mark.parametrize("script", ROOT_ONLY)
def test_apply_refused_without_root(script: str, sandbox: dict[str, str]) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the script as another user")
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash",
                          str(CH03 / script), "--apply"], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "needs root" in res.stderr


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the apply path runs as root only")


def test_system_tuning_apply_is_idempotent(sandbox: dict[str, str]) -> None:
    needs_root()
    root, etc = Path(sandbox["AISP_ROOT"]), Path(sandbox["ETC_DIR"])
    first = run("system_tuning.sh", sandbox, "--apply", "--persist")
    assert first.returncode == 0, first.stdout + first.stderr
    assert (root / "proc/sys/kernel/numa_balancing").read_text().strip() == "0"
    states = list((root / "var/lib/aisp").glob("tune-training-*.json"))
    assert len(states) == 1
    dropin = (etc / "sysctl.d/90-aisp.conf").read_text()
    assert dropin.count("vm.swappiness") == 1 and "vm.dirty_ratio = 40" in dropin
    second = run("system_tuning.sh", sandbox, "--apply", "--persist")
    assert second.returncode == 0 and "already up to date" in second.stdout
    assert "nothing written" in second.stdout
    assert (etc / "sysctl.d/90-aisp.conf").read_text() == dropin
    assert len(list((root / "var/lib/aisp").glob("tune-training-*.json"))) == 1


def test_cpu_gpu_apply_is_idempotent(sandbox: dict[str, str]) -> None:
    needs_root()
    first = run("cpu_gpu_numa_optimizations.sh", sandbox, "--apply")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "GPU 0 (00000000:3B:00.0): NUMA node 1" in first.stdout
    memlock = Path(sandbox["ETC_DIR"]) / "security/limits.d/90-aisp-memlock.conf"
    text = memlock.read_text()
    assert text.count("hard memlock unlimited") == 1
    assert log(sandbox).count("-pm 1") == 1 and "nvidia-smi -i 0 -pm 1" in log(sandbox)
    second = run("cpu_gpu_numa_optimizations.sh", sandbox, "--apply")
    assert second.returncode == 0 and "already up to date" in second.stdout
    assert memlock.read_text() == text and log(sandbox).count("-pm 1") == 1


def test_gpu_setup_apply_is_idempotent(sandbox: dict[str, str]) -> None:
    needs_root()
    assert run("gpu_setup_commands.sh", sandbox, "--apply").returncode == 0
    assert run("gpu_setup_commands.sh", sandbox, "--apply").returncode == 0
    assert log(sandbox).count("systemctl enable --now nvidia-persistenced") == 1
    modules = (Path(sandbox["ETC_DIR"]) / "modules-load.d/90-aisp-gpu.conf").read_text()
    assert modules.count("nvidia_peermem") == 1


def test_numa_topology_binds_each_gpu_to_its_node(sandbox: dict[str, str]) -> None:
    res = run("numa_topology_script.sh", sandbox)
    assert res.returncode == 0, res.stderr
    assert "GPU 0 (00000000:3B:00.0): NUMA node 1, local CPUs 4-7" in res.stdout
    assert "numactl --cpunodebind=1 --membind=1" in res.stdout
    assert "GPU 1 (00000000:86:00.0): NUMA node -1" in res.stdout
    launched = run("numa_topology_script.sh", sandbox, "--apply", "--", "bash", "-c",
                   'echo "ran on $CUDA_VISIBLE_DEVICES $*" >> "$STUB_LOG"', "x")
    assert launched.returncode == 0, launched.stderr
    assert "numactl --cpunodebind=1 --membind=1" in log(sandbox)
    assert "ran on 0 --gpu 0" in log(sandbox) and "ran on 1 --gpu 0" in log(sandbox)
    assert run("numa_topology_script.sh", sandbox, "--apply").returncode == 2
