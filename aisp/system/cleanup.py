"""What ``aisp cleanup`` removes: built binaries, run artifacts, Python and compile caches."""

from __future__ import annotations

import getpass
import os
import shutil
import tempfile
from pathlib import Path

from aisp.harness.discovery import chapters

COMPILE_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _pycaches(root: Path) -> list[Path]:
    """``__pycache__`` folders under ``root``, not descending into hidden folders or virtualenvs."""
    found = []
    for folder, dirs, _ in os.walk(root):
        if "__pycache__" in dirs:
            found.append(Path(folder) / "__pycache__")
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")
                   and not (Path(folder) / d / "pyvenv.cfg").exists()]
    return found


def user_compile_caches() -> list[Path]:
    """The per-user default caches of TorchInductor and Triton, shared with every other project."""
    return [Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}", Path.home() / ".triton" / "cache"]


def _env_compile_caches(root: Path) -> list[Path]:
    """Compile caches that $TORCHINDUCTOR_CACHE_DIR / $TRITON_CACHE_DIR point inside ``root``."""
    paths = [Path(os.environ[v]).resolve() for v in COMPILE_CACHE_VARS if os.environ.get(v)]
    return [p for p in paths if p.is_relative_to(root.resolve()) and p != root.resolve()]


def removable(root: Path, compile_caches: bool = False) -> list[Path]:
    """Everything cleanup would remove under ``root`` that exists now, each path once.

    ``ch*/bin`` (built binaries), ``artifacts/``, ``.pytest_cache``, ``__pycache__`` folders and
    compile caches kept inside the repository. ``compile_caches`` adds the user-wide TorchInductor
    and Triton caches, which other projects share, so they are only removed when asked for.
    """
    candidates = [folder / "bin" for folder in chapters(root).values()]
    candidates += [root / "artifacts", root / ".pytest_cache", *_pycaches(root), *_env_compile_caches(root)]
    if compile_caches:
        candidates += user_compile_caches()
    unique = dict.fromkeys(p for p in candidates if p.exists() or p.is_symlink())
    return [p for p in unique if not any(parent in unique for parent in p.parents)]


def size_bytes(path: Path) -> int:
    """Bytes held by a file or a folder tree (links not followed)."""
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum((Path(d) / f).lstat().st_size for d, _, files in os.walk(path) for f in files)


def remove(paths: list[Path]) -> None:
    """Delete files, links (the link only) and folder trees."""
    for path in paths:
        if path.is_symlink() or path.is_file():
            path.unlink()
        else:
            shutil.rmtree(path)
