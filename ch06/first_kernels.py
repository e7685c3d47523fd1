"""First kernels: build first_kernels.cu, say hello from 2 blocks of 4 threads, and fill a matrix
through a 2-D grid, checked against PyTorch.

Run: python ch06/first_kernels.py [--rows 100 --cols 37]   (needs a CUDA GPU and nvcc)
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import torch

from aisp.kits import native

LIBRARY = native.Library((Path(__file__).resolve().parent / "first_kernels.cu",), flags=("-DCH06_LIBRARY",))


def grid_for(rows: int, cols: int, block: int = 16) -> tuple[int, int]:
    """Blocks along x (columns) and y (rows) that cover the matrix: rounded up to whole blocks."""
    return -(-cols // block), -(-rows // block)


def fill_2d(lib: ctypes.CDLL, rows: int, cols: int) -> tuple[torch.Tensor, tuple[int, int]]:
    out = torch.full((rows, cols), -1, dtype=torch.int32, device="cuda")
    grid = (ctypes.c_int * 2)()
    lib.index_2d_run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    native.check(lib.index_2d_run(out.data_ptr(), rows, cols, grid, native.stream()), "index_2d")
    torch.cuda.synchronize()
    return out, (grid[0], grid[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100, help="rows of the matrix filled through the 2-D grid")
    parser.add_argument("--cols", type=int, default=37, help="columns of that matrix")
    args = parser.parse_args(argv)
    if reason := native.unavailable():
        print(f"SKIPPED: {reason}")
        return 0
    lib = LIBRARY.load()
    sys.stdout.flush()
    native.check(lib.hello_run(2, 4), "hello")
    out, grid = fill_2d(lib, args.rows, args.cols)
    expected = torch.arange(args.rows * args.cols, dtype=torch.int32, device="cuda").view(args.rows, args.cols)
    ok = torch.equal(out, expected)
    threads = grid[0] * grid[1] * 256
    print(f"index_2d: {args.rows}x{args.cols} matrix, grid {grid[0]}x{grid[1]} of 16x16 blocks = {threads} "
          f"threads for {args.rows * args.cols} elements ({threads - args.rows * args.cols} masked off)")
    print("All results match PyTorch." if ok else "MISMATCH against PyTorch.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
