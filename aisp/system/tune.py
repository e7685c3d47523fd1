"""``aisp system tune``: plan, apply, verify and roll back the host knobs of a profile.

Only sysctl/sysfs values that a write changes at once and a reboot reverts are applied. Everything
disruptive (GPU reset, ECC or MIG mode, swapoff, kernel command line, BIOS) is printed as a manual
step and never run. Apply writes only what differs, saves the previous values to a state file
first (atomic write), then re-reads each value to verify it took.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from aisp.harness.artifacts import atomic_write_json
from aisp.system.model import Finding, Grade, Profile
from aisp.system.procfs import active_choice, read, under

STATE_SCHEMA_VERSION = 1
STATE_DIR = "/var/lib/aisp"


def _dirty_in_bytes(root: Path) -> str | None:
    for name in ("dirty_bytes", "dirty_background_bytes"):
        if (read(root, f"/proc/sys/vm/{name}") or "0") != "0":
            return f"vm.{name} is set: writing a ratio would zero it; left alone"
    return None


@dataclass(frozen=True)
class Knob:
    """One tunable file and its target per profile."""

    check: str
    """The audit check this knob fixes (its finding is not repeated as a manual step)."""
    path: str
    """Absolute path; one "*" expands to one step per match (e.g. every CPU's governor)."""
    targets: Mapping[str, str]
    selector: bool = False
    """The file shows "choice [active] choice"; the bracketed word is the value."""
    persist: str = ""
    """How to make the value survive a reboot (tune itself never writes boot configuration)."""
    guard: Callable[[Path], str | None] | None = None
    """Returns why the knob must be left alone here, or None."""


_SYSCTL = "add '{0} = {1}' to /etc/sysctl.d/90-aisp.conf"
KNOBS = (
    Knob("cpu.numa.balancing", "/proc/sys/kernel/numa_balancing", {"training": "0", "inference": "0"},
         persist=_SYSCTL.format("kernel.numa_balancing", 0)),
    Knob("mem.thp.enabled", "/sys/kernel/mm/transparent_hugepage/enabled",
         {"training": "always", "inference": "madvise"}, selector=True,
         persist="kernel command line transparent_hugepage=<value>"),
    Knob("mem.thp.defrag", "/sys/kernel/mm/transparent_hugepage/defrag",
         {"training": "madvise", "inference": "madvise"}, selector=True, persist="a systemd unit or tuned profile"),
    Knob("mem.swappiness", "/proc/sys/vm/swappiness", {"training": "10", "inference": "10"},
         persist=_SYSCTL.format("vm.swappiness", 10)),
    Knob("mem.dirty", "/proc/sys/vm/dirty_ratio", {"training": "40", "inference": "10"},
         persist=_SYSCTL.format("vm.dirty_ratio", "<value>"), guard=_dirty_in_bytes),
    Knob("mem.dirty", "/proc/sys/vm/dirty_background_ratio", {"training": "10", "inference": "3"},
         persist=_SYSCTL.format("vm.dirty_background_ratio", "<value>"), guard=_dirty_in_bytes),
    Knob("cpu.governor", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
         {"training": "performance", "inference": "performance"}, persist="tuned-adm profile "
         "accelerator-performance, or a systemd unit running cpupower"),
)


@dataclass(frozen=True)
class Step:
    """One file of the plan: what it holds, what the profile wants, and what apply will do."""

    check: str
    path: str
    current: str | None
    target: str
    action: str
    """"write" (differs), "ok" (already the target), "absent" (no such file here), "skip" (guarded)."""
    note: str = ""
    persist: str = ""
    selector: bool = False


def _expand(root: Path, path: str) -> list[str]:
    if "*" not in path:
        return [path]
    return sorted("/" + str(p.relative_to(root)) for p in root.glob(path.lstrip("/")))


def read_value(root: Path, path: str, selector: bool) -> str | None:
    """The current value of a knob file (the bracketed choice of a selector)."""
    text = read(root, path)
    return active_choice(text) if text is not None and selector else text


def make_plan(root: Path, profile: Profile, knobs: tuple[Knob, ...] = KNOBS) -> list[Step]:
    """What ``tune --profile`` would change under ``root``; changes nothing."""
    steps = []
    for knob in knobs:
        target = knob.targets[profile]
        blocked = knob.guard(root) if knob.guard else None
        for path in _expand(root, knob.path):
            current = read_value(root, path, knob.selector)
            action = ("absent" if current is None else "skip" if blocked
                      else "ok" if current == target else "write")
            steps.append(Step(knob.check, path, current, target, action, blocked or "", knob.persist, knob.selector))
    return steps


def manual_steps(findings: list[Finding], knobs: tuple[Knob, ...] = KNOBS) -> list[Finding]:
    """Audit findings that need a change tune never makes itself (printed with their command)."""
    automatic = {k.check for k in knobs}
    return [f for f in findings if f.grade in (Grade.WARN, Grade.FAIL) and f.fix and f.check not in automatic]


def writable(root: Path, path: str) -> bool:
    """Mode bits allow a write and the mount is not read-only (the write's errno is still the judge)."""
    target = under(root, path)
    return os.access(target, os.W_OK) and not os.statvfs(target).f_flag & os.ST_RDONLY


def default_state_path(root: Path, profile: str) -> Path:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return under(root, STATE_DIR) / f"tune-{profile}-{stamp}.json"


@dataclass(frozen=True)
class Outcome:
    """One write and its verification."""

    path: str
    wanted: str
    observed: str | None
    ok: bool
    error: str = ""


def _write_and_verify(root: Path, path: str, value: str, selector: bool) -> Outcome:
    try:
        under(root, path).write_text(value + "\n")
    except OSError as err:
        return Outcome(path, value, read_value(root, path, selector), False, f"{err.strerror} (errno {err.errno})")
    seen = read_value(root, path, selector)
    return Outcome(path, value, seen, seen == value, "" if seen == value else "value did not take")


def _check_allowed(root: Path, paths: list[str], is_root: bool) -> None:
    if not is_root:
        raise PermissionError("tune --apply needs root (run it with sudo); nothing was changed")
    blocked = [p for p in paths if not writable(root, p)]
    if blocked:
        raise PermissionError(f"not writable (read-only mount, container, or no privilege): {blocked}; "
                              "nothing was changed")


def apply_plan(plan: list[Step], root: Path, profile: str, state_path: Path, is_root: bool) -> list[Outcome]:
    """Write every "write" step after saving the previous values to ``state_path``; verify each.

    Stops at the first write that fails or does not verify: the state file already lists everything,
    so ``rollback`` restores what was written.
    """
    writes = [s for s in plan if s.action == "write"]
    if not writes:
        return []
    _check_allowed(root, [s.path for s in writes], is_root)
    items = [{"path": s.path, "previous": read_value(root, s.path, s.selector), "target": s.target,
              "selector": s.selector} for s in writes]
    state = {"schema_version": STATE_SCHEMA_VERSION, "tool": "aisp system tune", "profile": profile,
             "root": str(root), "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
             "items": items}
    atomic_write_json(state_path, state)
    outcomes = []
    for step in writes:
        outcomes.append(_write_and_verify(root, step.path, step.target, step.selector))
        if not outcomes[-1].ok:
            break
    return outcomes


def rollback(state_path: Path, is_root: bool) -> list[Outcome]:
    """Restore the values a state file recorded (in reverse order), writing only what differs."""
    state = json.loads(state_path.read_text())
    if state.get("schema_version") != STATE_SCHEMA_VERSION or state.get("tool") != "aisp system tune":
        raise ValueError(f"{state_path} is not an aisp tune state file (schema {STATE_SCHEMA_VERSION})")
    root = Path(state["root"])
    items = [i for i in reversed(state["items"]) if read_value(root, i["path"], i["selector"]) != i["previous"]]
    if not items:
        return []
    _check_allowed(root, [i["path"] for i in items], is_root)
    return [_write_and_verify(root, i["path"], i["previous"], i["selector"]) for i in items]


def plan_to_json(plan: list[Step], manual: list[Finding]) -> dict:
    return {"schema_version": STATE_SCHEMA_VERSION, "steps": [asdict(s) for s in plan],
            "manual": [f.to_dict() for f in manual]}
