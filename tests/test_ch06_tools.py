"""ch06/occupancy.py's model and table on recorded sm_90 figures (no GPU): the limit that binds
at each block size, the occupancy it gives, and a runtime answer that disagrees is flagged."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import pytest

from aisp.harness.loader import import_module_at

occupancy = import_module_at(Path(__file__).resolve().parents[1] / "ch06" / "occupancy.py")
HOPPER = occupancy.SmLimits()
KERNELS = {k.name: k for k in occupancy.RECORDED}


@pytest.mark.parametrize(("name", "block", "blocks", "binding"), [
    ("add_per_element", 32, 32, "blocks/SM"),      # the block_size baseline: 50% occupancy
    ("add_per_element", 256, 8, "threads"),
    ("add_blocked4", 256, 8, "threads"),            # block_size's float4 variant: 27 registers
    ("add_blocked4", 512, 0, "block > max threads"),
    ("dequantize", 128, 6, "shared memory"),       # the occupancy_api baseline: 37.5%
    ("dequantize", 1024, 2, "threads"),            # what the occupancy API picks
    ("dequantize4", 1024, 2, "threads"),           # the same for the ILP variant's kernel
    ("affine_rows", 256, 8, "threads"),            # vectorized_ops' native kernel
    ("affine_rows", 512, 0, "block > max threads"),
    ("horner_free", 256, 4, "registers"),          # the launch_bounds baseline: 64 registers
    ("horner_bounded", 256, 8, "threads"),
    ("horner_bounded", 512, 0, "block > max threads"),
    ("horner_fitted", 256, 8, "threads"),          # the fitted variant: 30 registers, no spill
    ("horner_pipelined", 256, 8, "threads"),       # the pipelined variant: 32 registers, no spill
    ("horner_async", 256, 8, "threads"),           # the async variant: 32 registers, 24.2 KiB shared (9 fit)
    ("scores_swizzled", 128, 10, "registers"),     # bank_conflicts' swizzled variant: 48 registers
    ("scores_swizzled", 256, 0, "block > max threads"),
])
def test_blocks_per_sm_and_binding_limit(name: str, block: int, blocks: int, binding: str) -> None:
    assert occupancy.blocks_per_sm(KERNELS[name], block, HOPPER) == (blocks, binding)


def test_registers_are_allocated_per_warp_in_units_of_256() -> None:
    # 40 registers x 32 lanes = 1,280 per warp: 12 warps in each partition's 16,384, 48 warps = 6 blocks of 8
    assert occupancy.blocks_per_sm(occupancy.Kernel("k", 40, 0), 256, HOPPER) == (6, "registers")
    # 33 registers round up to 1,280 per warp as well (33 x 32 = 1,056 -> 1,280); at 64 threads the
    # partitions matter: 48 warps hold 24 blocks of 2 warps, not 65,536 / 2,560 = 25
    assert occupancy.blocks_per_sm(occupancy.Kernel("k", 40, 0), 64, HOPPER) == (24, "registers")
    assert occupancy.blocks_per_sm(occupancy.Kernel("k", 33, 0), 1024, HOPPER) == (1, "registers")


def test_occupancy_counts_whole_warps() -> None:
    assert occupancy.occupancy(6, 128, HOPPER) == pytest.approx(0.375)
    assert occupancy.occupancy(1, 48, HOPPER) == pytest.approx(64 / 2048)


def test_table_lists_each_kernel_and_block_size() -> None:
    text = occupancy.table(occupancy.RECORDED, [128, 1024], HOPPER)
    lines = text.splitlines()
    assert len(lines) == 1 + 2 * len(occupancy.RECORDED)
    row = next(line for line in lines if line.startswith("dequantize") and " 128 " in line)
    assert row.split()[-4:] == ["6", "38%", "shared", "memory"]


def test_table_flags_a_runtime_answer_that_differs() -> None:
    kernels = (KERNELS["horner_free"],)
    agree = occupancy.table(kernels, [256], HOPPER, {("horner_free", 256): 4})
    differ = occupancy.table(kernels, [256], HOPPER, {("horner_free", 256): 5})
    assert agree.splitlines()[1].endswith("4 ok") and differ.splitlines()[1].endswith("5 DIFFERS")


def test_recorded_mode_prints_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert occupancy.main(["--recorded", "--blocks", "256"]) == 0
    out = capsys.readouterr().out
    assert "horner_free" in out and "registers" in out


def fake_runtime(blocks: dict[tuple[int, int], int]) -> SimpleNamespace:
    """Stands in for occupancy.cu's library: an H200's limits, horner_free and dequantize."""
    attrs = {0: (64, 0, 0, 1024), 1: (32, 32768, 0, 1024)}

    def fill(arr: ctypes.Array, values: tuple[int, ...]) -> int:
        for i, v in enumerate(values):
            arr[i] = v
        return 0

    def set_ref(ref: object, value: int) -> int:
        ref._obj.value = value
        return 0

    return SimpleNamespace(
        occ_device=lambda out: fill(out, (132, 2048, 65536, 233472, 32, 1024)),
        occ_count=lambda: 2, occ_name=lambda i: [b"horner_free", b"dequantize"][i],
        occ_attributes=lambda i, out: fill(out, attrs[i]),
        occ_blocks=lambda i, size, ref: set_ref(ref, blocks[(i, size)]),
        occ_suggest=lambda i, grid, block: set_ref(grid, 264) or set_ref(block, 1024))


def test_query_reads_the_runtime_and_the_model_agrees() -> None:
    lib = fake_runtime({(0, 256): 4, (0, 1024): 1, (1, 256): 6, (1, 1024): 2})
    sm, kernels, api, advice = occupancy.query(lib, [256, 1024])
    assert sm == HOPPER and [k.name for k in kernels] == ["horner_free", "dequantize"]
    assert all(api[(k.name, s)] == occupancy.blocks_per_sm(k, s, sm)[0] for k in kernels for s in (256, 1024))
    assert advice[1].split() == ["dequantize", "block", "1024,", "grid", "264"]
