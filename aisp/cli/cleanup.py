"""``aisp cleanup``: list what would be removed, ask, then remove it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aisp.harness.discovery import repo_root
from aisp.system.cleanup import removable, remove, size_bytes


def cleanup(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
    compile_caches: Annotated[bool, typer.Option(
        "--compile-caches", help="Also remove the user-wide TorchInductor and Triton caches.")] = False,
    root: Annotated[Path | None, typer.Option(help="Repository to clean (default: this checkout).")] = None,
) -> None:
    """Remove built binaries (ch*/bin), artifacts/, __pycache__, .pytest_cache and compile caches."""
    root = (root or repo_root()).resolve()
    paths = removable(root, compile_caches)
    if not paths:
        typer.echo(f"Nothing to remove under {root}.")
        return
    for path in paths:
        typer.echo(f"{size_bytes(path) / 1e6:10.1f} MB  {path}")
    if dry_run:
        typer.echo("--dry-run: nothing removed.")
        return
    if not yes and not typer.confirm(f"Remove these {len(paths)} paths?"):
        typer.echo("Nothing removed.")
        raise typer.Exit(1)
    remove(paths)
    typer.echo(f"Removed {len(paths)} paths.")
