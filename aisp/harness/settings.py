"""Process-wide state both variants share (torch's settings, the globals of the pair's own modules):
restored before each call of a variant, and the variant that changed it named in its notes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


def _attribute(owner: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    return (lambda: getattr(owner, name)), (lambda value: setattr(owner, name, value))


TORCH_SETTINGS: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
    "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "cuda.matmul.allow_tf32": _attribute(torch.backends.cuda.matmul, "allow_tf32"),
    **{f"cudnn.{name}": _attribute(torch.backends.cudnn, name) for name in ("allow_tf32", "benchmark", "deterministic")},
    "num_threads": (torch.get_num_threads, torch.set_num_threads),
    "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "deterministic_algorithms": (
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
}
"""Name → (read, write), restored in this order (the matmul precision also sets allow_tf32)."""


def _read(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except RuntimeError:  # torch refuses legacy TF32 reads once the new fp32_precision API was used
        return None


class ProcessSettings:
    """A snapshot taken before any pair code runs; module globals compared by identity (a global
    rebound counts, an object changed in place does not)."""

    def __init__(self, folder: Path, notes: list[str]) -> None:
        self.folder, self.blame = folder.resolve(), notes
        self.torch = {name: _read(get) for name, (get, _) in TORCH_SETTINGS.items()}
        self.modules: dict[str, tuple[ModuleType, dict[str, Any]]] = {}

    def enter(self, notes: list[str] | None) -> None:
        """Before other code runs: undo what changed since the last call, noting it in the notes of
        whoever ran since (``self.blame``); ``notes`` belong to the code about to run."""
        changed = [name for name, (get, _) in TORCH_SETTINGS.items()
                   if self.torch[name] is not None and _read(get) != self.torch[name]]
        for name in changed:
            TORCH_SETTINGS[name][1](self.torch[name])
        for module, snapshot in self.modules.values():
            for key in [k for k, v in snapshot.items() if vars(module).get(k, snapshot) is not v]:
                setattr(module, key, snapshot[key])
                changed.append(f"{module.__name__}.{key}")
        note = f"changed process-wide {', '.join(changed)}; restored before each timed call"
        if changed and self.blame is not None and note not in self.blame:
            self.blame.append(note)
        self.blame = notes

    def snapshot_modules(self) -> None:
        """Snapshot the pair's modules imported since the last snapshot (called after loading and
        after setup, not before each call: globbing and resolving the folder's files took 0.56 ms a
        call for ch13 and left the CPU cache cold right before the timed window)."""
        for path in self.folder.glob("*.py"):
            module = sys.modules.get(path.stem)
            if path.stem not in self.modules and Path(getattr(module, "__file__", None) or "/").resolve() == path:
                self.modules[path.stem] = (module, dict(vars(module)))
