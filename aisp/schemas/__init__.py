"""JSON Schemas (draft 2020-12) of the files aisp writes and reads.

``result`` (a pair's ``benchmark_test_results.json``), ``summary`` (a run's ``summary.json``),
``manifest`` (a run's ``manifest.json``) and ``expectations`` (``chNN/expectations_<key>.json``);
``defs`` holds what they share. They are published with the package (``aisp/schemas/*.schema.json``)
for other tools to validate against; validating here needs the ``jsonschema`` package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent
NAMES = ("result", "summary", "manifest", "expectations")


def load(name: str) -> dict[str, Any]:
    """The schema called ``name`` (one of :data:`NAMES` or ``defs``)."""
    return json.loads((FOLDER / f"{name}.schema.json").read_text())


def validator(name: str) -> Any:
    """A jsonschema validator of schema ``name`` that resolves the others by their ``urn:aisp:`` ids."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schemas = [load(n) for n in (*NAMES, "defs")]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    return Draft202012Validator(load(name), registry=registry)


def for_file(path: Path) -> str | None:
    """Which schema a file of a run folder or chapter follows, by its name; None for others."""
    if path.name == "benchmark_test_results.json":
        return "result"
    if path.name in ("summary.json", "manifest.json"):
        return path.stem
    if path.name.startswith("expectations_") and path.suffix == ".json":
        return "expectations"
    return None
