"""Host audit checks against the fake two-socket tree: each check reaches each grade it can give."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aisp.system import checks_cpu, checks_memory, checks_process
from aisp.system.model import AuditContext, Grade

FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dst = tmp_path / "root"
    shutil.copytree(FIXTURE, dst)
    return dst


def put(root: Path, rel: str, text: str) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def ctx(root: Path, profile: str = "training", **kw) -> AuditContext:
    return AuditContext(root=root, profile=profile, env=kw.pop("env", {}), probe_torch=False, **kw)


def test_fixture_host_is_badly_tuned(root: Path) -> None:
    c = ctx(root)
    assert checks_cpu.numa_balancing(c).grade is Grade.WARN
    assert checks_cpu.governor(c).grade is Grade.WARN
    assert checks_memory.swap(c).grade is Grade.WARN
    assert checks_memory.swappiness(c).grade is Grade.WARN
    assert checks_memory.memlock(c).grade is Grade.WARN
    assert checks_memory.thp_defrag(c).grade is Grade.WARN
    assert checks_memory.shm(c).grade is Grade.FAIL
    assert checks_process.host_allocator(c).grade is Grade.WARN


def test_numa_layout_and_binding(root: Path) -> None:
    layout = checks_cpu.numa_layout(ctx(root))
    assert layout.grade is Grade.PASS and "node1: CPUs 4-7" in layout.observed
    binding = checks_cpu.process_binding(ctx(root))
    assert binding.grade is Grade.WARN and "nodes [0, 1]" in binding.observed
    put(root, "proc/self/status", "Cpus_allowed_list:\t4-7\nMems_allowed_list:\t1")
    assert checks_cpu.process_binding(ctx(root)).grade is Grade.PASS
    (root / "proc/self/status").unlink()
    assert checks_cpu.process_binding(ctx(root)).grade is Grade.UNKNOWN
    shutil.rmtree(root / "sys/devices/system/node")
    assert checks_cpu.numa_layout(ctx(root)).grade is Grade.SKIP


def test_numa_balancing_grades(root: Path) -> None:
    assert checks_cpu.numa_balancing(ctx(root)).needs_root
    put(root, "proc/sys/kernel/numa_balancing", "0")
    assert checks_cpu.numa_balancing(ctx(root)).grade is Grade.PASS
    put(root, "proc/sys/kernel/numa_balancing", "1")
    shutil.rmtree(root / "sys/devices/system/node/node1")
    assert checks_cpu.numa_balancing(ctx(root)).grade is Grade.PASS  # one node: nothing to move
    (root / "proc/sys/kernel/numa_balancing").unlink()
    assert checks_cpu.numa_balancing(ctx(root)).grade is Grade.SKIP


def test_governor_grades(root: Path) -> None:
    warn = checks_cpu.governor(ctx(root))
    assert warn.observed == "powersave on 8 CPUs" and "cpupower" in warn.fix
    for cpu in range(8):
        put(root, f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance")
    assert checks_cpu.governor(ctx(root)).grade is Grade.PASS
    put(root, "sys/devices/system/cpu/cpu7/cpufreq/scaling_governor", "schedutil")
    assert checks_cpu.governor(ctx(root)).grade is Grade.WARN  # every CPU is read, not only cpu0
    for cpu in range(8):
        shutil.rmtree(root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq")
    assert checks_cpu.governor(ctx(root)).grade is Grade.SKIP


def test_cstates_by_profile(root: Path) -> None:
    assert checks_cpu.cstates(ctx(root)).grade is Grade.PASS
    warn = checks_cpu.cstates(ctx(root, "inference"))
    assert warn.grade is Grade.WARN and "C6 (133 us)" in warn.observed
    put(root, "sys/devices/system/cpu/cpu0/cpuidle/state3/disable", "1")
    assert checks_cpu.cstates(ctx(root, "inference")).grade is Grade.PASS
    put(root, "sys/devices/system/cpu/cpuidle/current_driver", "haltpoll")
    assert checks_cpu.cstates(ctx(root, "inference")).grade is Grade.SKIP


def test_isolated_and_irqbalance_for_inference(root: Path) -> None:
    assert checks_cpu.isolated_cores(ctx(root, "inference")).grade is Grade.WARN
    put(root, "sys/devices/system/cpu/isolated", "2-3")
    assert checks_cpu.isolated_cores(ctx(root, "inference")).grade is Grade.PASS
    assert checks_cpu.irqbalance(ctx(root, "inference")).grade is Grade.WARN
    assert checks_cpu.irqbalance(ctx(root, "training")).grade is Grade.PASS
    put(root, "etc/default/irqbalance", 'IRQBALANCE_BANNED_CPULIST="2-3"')
    assert checks_cpu.irqbalance(ctx(root, "inference")).grade is Grade.PASS


def test_thp_grades_by_profile(root: Path) -> None:
    assert checks_memory.thp_enabled(ctx(root)).grade is Grade.WARN
    assert checks_memory.thp_enabled(ctx(root, "inference")).grade is Grade.PASS
    put(root, "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never")
    assert checks_memory.thp_enabled(ctx(root)).grade is Grade.PASS
    assert checks_memory.thp_enabled(ctx(root, "inference")).grade is Grade.WARN
    put(root, "sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never")
    assert checks_memory.thp_defrag(ctx(root)).grade is Grade.PASS
    shutil.rmtree(root / "sys/kernel/mm/transparent_hugepage")
    assert checks_memory.thp_enabled(ctx(root)).grade is Grade.SKIP


def test_swap_swappiness_dirty(root: Path) -> None:
    put(root, "proc/sys/vm/swappiness", "10")
    assert checks_memory.swappiness(ctx(root)).grade is Grade.PASS
    put(root, "proc/sys/vm/swappiness", "60")
    put(root, "proc/swaps", "Filename Type Size Used Priority")
    assert checks_memory.swap(ctx(root)).grade is Grade.PASS
    assert checks_memory.swappiness(ctx(root)).grade is Grade.PASS  # no swap device
    assert checks_memory.dirty(ctx(root)).grade is Grade.WARN
    put(root, "proc/sys/vm/dirty_ratio", "40")
    assert checks_memory.dirty(ctx(root)).grade is Grade.PASS
    assert checks_memory.dirty(ctx(root, "inference")).grade is Grade.WARN
    put(root, "proc/sys/vm/dirty_bytes", "1073741824")
    assert "bytes" in checks_memory.dirty(ctx(root, "inference")).note


def test_memlock_and_shm(root: Path) -> None:
    put(root, "proc/self/limits", "Max locked memory         unlimited            unlimited            bytes")
    assert checks_memory.memlock(ctx(root)).grade is Grade.PASS
    put(root, "proc/self/limits", "Max open files 1024 1024 files")
    assert checks_memory.memlock(ctx(root)).grade is Grade.UNKNOWN
    mountinfo = (root / "proc/self/mountinfo").read_text()
    put(root, "proc/self/mountinfo", mountinfo.replace("size=65536k\n", "size=2g\n").rstrip())
    assert checks_memory.shm(ctx(root)).grade is Grade.WARN
    put(root, "proc/self/mountinfo", mountinfo.replace("size=65536k\n", "size=16g\n").rstrip())
    assert checks_memory.shm(ctx(root)).grade is Grade.PASS
    put(root, "proc/self/mountinfo", "\n".join(line for line in mountinfo.splitlines() if "/dev/shm" not in line))
    assert checks_memory.shm(ctx(root)).grade is Grade.FAIL


def test_allocator_env_without_library_fails(root: Path) -> None:
    c = ctx(root, env={"MALLOC_CONF": "background_thread:true"})
    fail = checks_process.host_allocator(c)
    assert fail.grade is Grade.FAIL and "MALLOC_CONF" in fail.observed
    put(root, "proc/self/maps", "7f00-7f10 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    assert checks_process.host_allocator(c).grade is Grade.PASS


def test_torch_allocator_grading() -> None:
    grade, observed = checks_process.grade_alloc("expandable_segments:True", {"expandable_segments": False})
    assert grade is Grade.FAIL and "not in effect" in observed
    assert checks_process.grade_alloc("expandable_segments:True", {"expandable_segments": True})[0] is Grade.PASS
    assert checks_process.grade_alloc("", {"expandable_segments": False})[0] is Grade.PASS
    assert checks_process.grade_alloc("expandable_segments:True", None)[0] is Grade.UNKNOWN
    assert checks_process.parse_alloc_conf("a:1, b:x") == {"a": "1", "b": "x"}


def test_container_and_data_path(root: Path) -> None:
    found = checks_process.container(ctx(root, env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}))
    assert "docker (/.dockerenv)" in found.observed and "kubepods" in found.observed
    assert "kubernetes" in found.observed and "read-only" in found.note
    assert checks_process.data_path(ctx(root)).grade is Grade.SKIP
    assert checks_process.data_path(ctx(root, data_path=Path("/data/imagenet"))).grade is Grade.PASS
    over = checks_process.data_path(ctx(root, data_path=Path("/workspace/data")))
    assert over.grade is Grade.WARN and "overlay" in over.observed
