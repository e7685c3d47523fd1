"""Occupancy calculator for chapter 6's kernels: registers, shared memory, resident blocks per SM.

For each kernel the pairs run (occupancy.cu includes their sources) it reads registers, static
shared memory and local memory from ``cudaFuncGetAttributes``, computes blocks per SM at each
block size from the SM's limits (threads; registers in 256-register units per warp and whole
warps per scheduler partition; shared memory plus the 1 KiB the runtime reserves per block, in
128-byte units; 32 blocks), names the limit that binds, and checks the figure against ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``; then the block
size and grid ``cudaOccupancyMaxPotentialBlockSize`` suggests.
Without a GPU, ``--recorded`` runs the same model on figures recorded from ``cuobjdump -res-usage``
(nvcc 13.0, sm_90) and the H100/H200 SM limits.
Run: python ch06/occupancy.py [--blocks 32 128 256 1024] [--recorded]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

from aisp.kits import native

LIBRARY = native.Library((Path(__file__).resolve().parent / "occupancy.cu",))


@dataclass(frozen=True)
class SmLimits:
    """One SM's limits (defaults: Hopper, H100/H200 SXM)."""

    sms: int = 132
    threads: int = 2048
    registers: int = 65536
    shared: int = 233472  # bytes (228 KiB)
    blocks: int = 32
    reserved_shared: int = 1024
    """Bytes the runtime reserves per block (sm_80 and later)."""
    register_unit: int = 256
    """Registers are allocated per warp in units of this many."""
    partitions: int = 4
    """Scheduler partitions: each holds a quarter of the registers and whole warps."""
    warp: int = 32


@dataclass(frozen=True)
class Kernel:
    name: str
    registers: int
    shared: int  # static shared memory per block, bytes
    local: int = 0  # local memory (spills, stack) per thread, bytes
    max_threads: int = 1024


RECORDED = (Kernel("add_per_element", 12, 0), Kernel("add_grid_stride", 31, 0),
            Kernel("add_blocked4", 27, 0, 0, 256),
            Kernel("dequantize", 32, 32768), Kernel("dequantize4", 32, 32768), Kernel("affine_rows", 32, 0, 0, 256),
            Kernel("horner_free", 64, 0),
            Kernel("horner_bounded", 32, 0, 32, 256), Kernel("horner_fitted", 30, 192, 0, 256),
            Kernel("horner_pipelined", 32, 192, 0, 256), Kernel("horner_async", 32, 24768, 0, 256),
            Kernel("scores_swizzled", 48, 16384, 0, 128))
"""From ``cuobjdump -res-usage`` of the sm_90 builds (nvcc 13.0); tests/test_ch06_sass.py re-reads them."""


def ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def register_limit(kernel: Kernel, warps: int, sm: SmLimits) -> int:
    """Blocks of ``warps`` warps whose registers fit: whole warps per partition, 4 partitions."""
    per_warp = ceil_to(kernel.registers * sm.warp, sm.register_unit)
    return sm.registers // sm.partitions // per_warp * sm.partitions // warps if per_warp else sm.blocks


def shared_limit(kernel: Kernel, sm: SmLimits) -> int:
    """Blocks whose shared memory (plus the reserved KiB, in 128-byte units) fits."""
    return sm.shared // ceil_to(kernel.shared + sm.reserved_shared, 128) if kernel.shared else sm.blocks


def blocks_per_sm(kernel: Kernel, block: int, sm: SmLimits) -> tuple[int, str]:
    """Resident blocks of ``block`` threads per SM, and the limit that binds."""
    if block > kernel.max_threads:
        return 0, "block > max threads"
    warps = -(-block // sm.warp)
    limits = {"blocks/SM": sm.blocks, "threads": sm.threads // (warps * sm.warp),
              "registers": register_limit(kernel, warps, sm), "shared memory": shared_limit(kernel, sm)}
    binding = min(limits, key=lambda k: limits[k])
    return limits[binding], binding


def occupancy(blocks: int, block: int, sm: SmLimits) -> float:
    """Resident threads (whole warps) over the SM's maximum."""
    return blocks * -(-block // sm.warp) * sm.warp / sm.threads


def table(kernels: tuple[Kernel, ...], sizes: list[int], sm: SmLimits,
          api: dict[tuple[str, int], int] | None = None) -> str:
    """One line per kernel and block size; ``api``: the runtime's blocks/SM to check against."""
    lines = [f"{'kernel':<16} {'regs':>4} {'smem/block':>10} {'local':>5} {'block':>5} {'blocks/SM':>9} "
             f"{'occupancy':>9}  limited by" + ("     runtime" if api else "")]
    for k in kernels:
        for size in sizes:
            blocks, binding = blocks_per_sm(k, size, sm)
            line = (f"{k.name:<16} {k.registers:>4} {k.shared:>8} B {k.local:>3} B {size:>5} {blocks:>9} "
                    f"{occupancy(blocks, size, sm):>9.0%}  {binding:<14}")
            if api:
                got = api[(k.name, size)]
                line += f" {got:>3} " + ("ok" if got == blocks else "DIFFERS")
            lines.append(line.rstrip())
    return "\n".join(lines)


def query(lib: ctypes.CDLL, sizes: list[int]) -> tuple[SmLimits, tuple[Kernel, ...], dict[tuple[str, int], int],
                                                        list[str]]:
    """The GPU's limits, each kernel's resources, the runtime's blocks/SM and its suggestions."""
    dev, attrs, n = (ctypes.c_int * 6)(), (ctypes.c_int * 4)(), ctypes.c_int()
    native.check(lib.occ_device(dev), "occ_device")
    sm = SmLimits(sms=dev[0], threads=dev[1], registers=dev[2], shared=dev[3], blocks=dev[4],
                  reserved_shared=dev[5])
    lib.occ_name.restype = ctypes.c_char_p
    kernels, api, advice = [], {}, []
    for i in range(lib.occ_count()):
        native.check(lib.occ_attributes(i, attrs), "cudaFuncGetAttributes")
        kernel = Kernel(lib.occ_name(i).decode(), attrs[0], attrs[1], attrs[2], attrs[3])
        kernels.append(kernel)
        for size in sizes:
            native.check(lib.occ_blocks(i, size, ctypes.byref(n)) if size <= kernel.max_threads else 0, "occ_blocks")
            api[(kernel.name, size)] = n.value if size <= kernel.max_threads else 0
        grid, block = ctypes.c_int(), ctypes.c_int()
        native.check(lib.occ_suggest(i, ctypes.byref(grid), ctypes.byref(block)), "cudaOccupancyMaxPotentialBlockSize")
        advice.append(f"  {kernel.name:<16} block {block.value:>4}, grid {grid.value:>5}")
    return sm, tuple(kernels), api, advice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[32, 128, 256, 1024], help="block sizes (threads per block) to model and measure")
    parser.add_argument("--recorded", action="store_true", help="model only, recorded sm_90 figures, no GPU")
    args = parser.parse_args(argv)
    reason = None if args.recorded else native.unavailable()
    if args.recorded or reason:
        print(f"({reason}: recorded sm_90 figures, Hopper limits)\n" if reason else "Recorded sm_90 figures, Hopper limits\n")
        print(table(RECORDED, args.blocks, SmLimits()))
        return 0
    sm, kernels, api, advice = query(LIBRARY.load(), args.blocks)
    print(f"Occupancy per SM ({sm.sms} SMs; each {sm.threads} threads, {sm.registers} registers, "
          f"{sm.shared // 1024} KiB shared, {sm.blocks} blocks)\n")
    print(table(kernels, args.blocks, sm, api))
    print("\ncudaOccupancyMaxPotentialBlockSize suggests:\n" + "\n".join(advice))
    return 0 if all(api[(k.name, s)] == blocks_per_sm(k, s, sm)[0] for k in kernels for s in args.blocks) else 1


if __name__ == "__main__":
    sys.exit(main())
