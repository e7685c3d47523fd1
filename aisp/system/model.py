"""What an audit check returns, and the context every check reads from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from aisp.system.nvml import Nvml

Profile = Literal["training", "inference"]
PROFILES: tuple[Profile, ...] = ("training", "inference")


class Grade(str, Enum):
    """How a setting compares with the recommendation for the chosen profile."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"
    """Does not apply here (no cpufreq in a VM, NVML NotSupported, single GPU for topology)."""
    UNKNOWN = "UNKNOWN"
    """Could not be read (no permission, an error): never counted as a pass."""


@dataclass(frozen=True)
class Finding:
    """One audited setting."""

    grade: Grade
    observed: str
    recommended: str
    source: str
    """Where the value was read: a path or an NVML call."""
    fix: str = ""
    """The command that brings the setting to the recommendation ("" when none applies)."""
    needs_root: bool = False
    hardware: bool = False
    """A hardware fault (ECC, row remapping, hardware slowdown, degraded link): outranks tuning advice."""
    note: str = ""
    check: str = ""
    """Stable id, e.g. "mem.thp.enabled" or "gpu0.ecc.errors"; the audit runner sets it."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["grade"] = self.grade.value
        return out


@dataclass(frozen=True)
class AuditContext:
    """Where an audit reads from; tests replace ``root``, ``nvml`` and ``env``."""

    root: Path = Path("/")
    """Filesystem root for every /proc and /sys read."""
    profile: Profile = "training"
    """Which recommendations to grade against."""
    nvml: Nvml | None = None
    """The NVML facade; None: no GPU reads (the reason is in ``nvml_reason``)."""
    nvml_reason: str = ""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    data_path: Path | None = None
    """Dataset/checkpoint folder whose filesystem is checked (None: skipped)."""
    probe_torch: bool = True
    """Ask PyTorch for its effective CUDA allocator settings (initialises CUDA when present)."""

    def by_profile(self, training: Any, inference: Any) -> Any:
        """The value for the profile being audited."""
        return training if self.profile == "training" else inference
