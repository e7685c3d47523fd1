"""Build chapter 1's CUDA C++ examples on demand (``make`` into ch01/bin/) and load them with ctypes."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import torch

import aisp

CH01 = Path(__file__).resolve().parent
REQUIRES = aisp.Requirements(cuda=True, executables=("nvcc", "make"))
"""What a pair built from a .cu file needs: a GPU to run on, nvcc and make to build."""


def arch(device: torch.device) -> str:
    """The GPU's compute capability without the dot ("90" for an H100/H200), as nvcc's sm_XX wants."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"{major}{minor}"


def library(name: str, device: torch.device) -> ctypes.CDLL:
    """``bin/lib<name>_sm<arch>.so``, (re)built by make when missing or older than its source."""
    target = f"bin/lib{name}_sm{arch(device)}.so"
    proc = subprocess.run(["make", "-s", "-C", str(CH01), f"ARCH={arch(device)}", target],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"building ch01/{target} failed:\n{proc.stdout}{proc.stderr}")
    return ctypes.CDLL(str(CH01 / target))


def stream(device: torch.device) -> ctypes.c_void_p:
    """The current PyTorch stream, to pass to a library call so it orders with PyTorch's work."""
    return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)


def check(status: int, what: str) -> None:
    if status:
        raise RuntimeError(f"{what} failed with status {status}")
