"""Find cuBLAS for the Makefile: ``python ch01/find_cublas.py`` prints -I/-L/-l flags.

It looks in the CUDA toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda), then in the
``nvidia-cublas`` wheel that PyTorch's CUDA build installs (``site-packages/nvidia/cu13``).
Prints nothing when no cuBLAS header is found (the build then fails naming ``cublas_v2.h``).
"""

from __future__ import annotations

import os
from pathlib import Path


def _search_roots() -> list[Path]:
    roots = [Path(p) for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    roots.append(Path("/usr/local/cuda"))
    try:
        import nvidia
        roots += [Path(p) for p in nvidia.__path__]
    except ImportError:
        pass
    return roots


def cublas_flags() -> list[str]:
    """-I/-L/-l flags for cuBLAS, or [] when no cuBLAS header is found."""
    for root in _search_roots():
        for header in sorted(root.glob("**/include/cublas_v2.h")):
            home = header.parent.parent
            libs = sorted(p for d in ("lib64", "lib") for p in (home / d).glob("libcublas.so*"))
            if libs:
                lib = libs[0]
                return [f"-I{header.parent}", f"-L{lib.parent}", f"-l:{lib.name}",
                        f"-Xlinker=-rpath,{lib.parent}"]
    return []


if __name__ == "__main__":
    print(" ".join(cublas_flags()))
