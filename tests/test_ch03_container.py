"""The chapter's Dockerfile: package names that exist, the allocator really preloaded, a non-root
user, no NUMA-hostile entrypoint. Each rule is shown to fire on a planted mistake."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).parents[1] / "ch03" / "docker_gpu_optimized.dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split()[0].upper(), line.split(None, 1)[1]) for line in joined.splitlines() if line.strip()]


def apt_packages(text: str) -> list[str]:
    found = []
    for kind, args in instructions(text):
        for m in re.finditer(r"apt-get install ([^&;|]+)", args) if kind == "RUN" else ():
            found += [w for w in m.group(1).split() if not w.startswith("-")]
    return found


def problems(text: str) -> list[str]:
    ins = instructions(text)
    env = " ".join(a for k, a in ins if k == "ENV")
    run = " ".join(a for k, a in ins if k == "RUN")
    users = [a.strip() for k, a in ins if k == "USER"]
    out = []
    if not users or users[-1] in ("root", "0"):
        out.append("runs as root")
    preload = re.search(r"LD_PRELOAD=(\S+)", env)
    if "MALLOC_CONF" in env and not (preload and "jemalloc" in preload.group(1)):
        out.append("MALLOC_CONF without jemalloc in LD_PRELOAD")
    if preload and preload.group(1) not in run:
        out.append(f"LD_PRELOAD path {preload.group(1)} is never created")
    if any("--interleave" in a for _, a in ins):
        out.append("numactl --interleave spreads memory over every node")
    if any("--privileged" in a for _, a in ins):
        out.append("--privileged")
    return out


def test_dockerfile_is_clean() -> None:
    assert problems(DOCKERFILE.read_text()) == []
    assert {"libjemalloc2", "libtcmalloc-minimal4", "numactl"} <= set(apt_packages(DOCKERFILE.read_text()))


@pytest.mark.parametrize("old, new, expected", [
    ("USER aisp", "USER root", "runs as root"),
    ("ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \\\n", "ENV ", "MALLOC_CONF without jemalloc"),
    ("/usr/local/lib/libjemalloc.so.2\n", "/usr/lib/libjemalloc.so\n", "never created"),
    ('CMD ["python", "ch03/train.py"]', 'ENTRYPOINT ["numactl", "--interleave=all"]', "--interleave"),
])
def test_planted_mistakes_fire(old: str, new: str, expected: str) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    assert any(expected in p for p in problems(text.replace(old, new, 1)))


def test_apt_package_names_exist() -> None:
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache here")
    probe = subprocess.run(["apt-cache", "search", "--names-only", "jemalloc"], capture_output=True, text=True)
    if not probe.stdout.strip():
        pytest.skip("these apt lists hold no jemalloc package (empty lists, or Ubuntu without universe)")
    for pkg in apt_packages(DOCKERFILE.read_text()):
        assert subprocess.run(["apt-cache", "show", pkg], capture_output=True).returncode == 0, pkg
    assert subprocess.run(["apt-cache", "show", "tcmalloc-minimal"], capture_output=True).returncode != 0
