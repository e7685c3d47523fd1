"""A run's options: one frozen dataclass, the only place their defaults are defined."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

ProfileLevel = Literal["none", "minimal", "full"]
Device = Literal["auto", "cpu", "cuda"]
PROFILE_LEVELS: tuple[str, ...] = get_args(ProfileLevel)
DEVICES: tuple[str, ...] = get_args(Device)


@dataclass(frozen=True)
class RunOptions:
    """How to run pairs."""

    iterations: int = 20
    """Timed iterations per variant."""
    warmup: int = 5
    """Untimed iterations per variant before timing."""
    seed: int = 0
    """Seed of the main pass; verification repeats on a seed drawn at random for each run."""
    device: Device = "auto"
    """Where to run: CUDA when present (auto), or forced."""
    timeout_multiplier: float = 1.0
    """Scales each workload's timeout_s."""
    suite_timeout: float | None = None
    """Seconds for the whole suite; pairs not started by then are recorded as timeouts."""
    reproducible: bool = False
    """Fixed seeds and deterministic algorithms; a nondeterministic op fails its pair."""
    cold_start: bool = False
    """Each variant timed in a fresh process (no interleaving; GC and allocator reset)."""
    flush_l2: bool = False
    """Evict the GPU's L2 before each timed iteration (outside the timed window)."""
    profile: ProfileLevel = "none"
    """none, minimal (torch.profiler trace) or full (plus Nsight where present)."""
    verify_only: bool = False
    """Import and verify, no timing."""
    update_expectations: bool = False
    """Rewrite chNN/expectations_<key>.json with this run's measurements."""
    artifacts_dir: Path = field(default=Path("artifacts"))
    """Where run folders are created."""

    def __post_init__(self) -> None:
        if self.iterations < 2:
            raise ValueError("--iterations must be at least 2 (a spread needs two samples)")
        if self.warmup < 0:
            raise ValueError("--warmup must be 0 or more")
        if self.timeout_multiplier <= 0:
            raise ValueError("--timeout-multiplier must be positive")
        if self.device not in DEVICES:
            raise ValueError(f"--device must be one of {', '.join(DEVICES)}, not '{self.device}'")
        if self.profile not in PROFILE_LEVELS:
            raise ValueError(f"--profile must be one of {', '.join(PROFILE_LEVELS)}, not '{self.profile}'")

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        data = dict(data)
        data["artifacts_dir"] = Path(data.get("artifacts_dir", "artifacts"))
        return cls(**data)
