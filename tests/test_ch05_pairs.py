"""Chapter 5 on the CPU: the file-reading pairs and the checkpoint pair match their baselines and
leave their inputs alone, clean up their files; the GPU pairs skip with the reason; the tools'
logic (disk ceiling stored in the peaks file, GDS verdicts) on recorded inputs."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at

CH05 = Path(__file__).resolve().parents[1] / "ch05"


@pytest.fixture(autouse=True)
def io_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every file the chapter writes goes under this test's own folder."""
    monkeypatch.setenv("AISP_IO_DIR", str(tmp_path))
    return tmp_path


def load(module: str) -> ModuleType:
    return import_module_at(CH05 / f"{module}.py")


SMALL = {"async_checkpoint": {"hidden": 256}, "packed_shards": {"samples": 1024, "sample_bytes": 4 << 10, "batch": 256},
         "mmap_loading": {"shards": 4, "rows": 1024, "features": 256, "batch": 128}}
"""Per pair, CPU sizes (the same code): at the GPU sizes the tests wrote 64 MiB checkpoints, 128 MiB
of shards and 256 MiB of arrays, and took CI about 30 s."""


def uring() -> ModuleType:
    """ch05_uring, or a skip where this machine forbids io_uring (its variant is then Unavailable)."""
    mod = load("ch05_uring")
    try:
        mod.Ring(2).close()
    except OSError as exc:
        pytest.skip(f"io_uring forbidden here: {exc}")
    return mod


def build(module: str, seed: int) -> aisp.Benchmark:
    if module.endswith("_uring"):
        uring()
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    if small := next((v for k, v in SMALL.items() if module.split("_", 1)[1].startswith(k)), None):
        bench.workload = replace(bench.workload, **small)
    return bench


def runs_on_cpu(module: str) -> bool:
    return unmet_requirements(load(module).get_benchmark().workload.requires, torch.device("cpu")) is None


PAIRS = variant_modules(CH05)
CPU_PAIRS = [p for p in PAIRS if runs_on_cpu(p[0]) and runs_on_cpu(p[1])]
GPU_PAIRS = [p for p in PAIRS if p not in CPU_PAIRS]


def test_the_cpu_pairs_are_the_ones_the_chapter_promises() -> None:
    assert {b for b, _ in CPU_PAIRS} == {"baseline_packed_shards", "baseline_mmap_loading",
                                         "baseline_async_checkpoint"}


def snapshot(bench: aisp.Benchmark) -> dict[str, torch.Tensor]:
    skip = set(bench.scratch) | set(bench.state)
    return {k: v.clone() for k, v in vars(bench).items() if isinstance(v, torch.Tensor) and k not in skip}


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_pair_matches_keeps_inputs_and_cleans_up(baseline: str, optimized: str, io_dir: Path) -> None:
    outs = []
    for module in (baseline, optimized):
        bench = build(module, seed=1)
        bench.setup()
        before = snapshot(bench)
        outs.append(bench.run().clone())
        for key, value in snapshot(bench).items():
            assert torch.equal(before[key], value), f"{module} changed input {key}"
        bench.teardown()
    assert list(io_dir.iterdir()) == [], "teardown() left files behind"
    torch.testing.assert_close(outs[1], outs[0], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), load(baseline).WORKLOAD)


@pytest.mark.parametrize(("baseline", "optimized"), GPU_PAIRS)
def test_gpu_pair_skips_with_reason_on_cpu(baseline: str, optimized: str) -> None:
    reason = unmet_requirements(load(optimized).get_benchmark().workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("module", sorted({m for p in PAIRS for m in p}))
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"


def test_kvikio_variant_names_its_package() -> None:
    req = load("optimized_gds_read_kvikio").get_benchmark().workload.requires
    assert "kvikio" in req.packages and req.cuda


@pytest.mark.parametrize("module", ["baseline_async_checkpoint", "optimized_async_checkpoint"])
def test_the_checkpoint_on_disk_holds_the_trained_weights(module: str) -> None:
    """The file holds the weights at the checkpoint (after the first steps), not ones the later
    steps of the call changed under the snapshot or the writer."""
    bench, reference = build(module, seed=0), build(module, seed=0)
    bench.setup()
    reference.setup()
    bench.run()
    reference.train(reference.workload.steps_before)
    saved = torch.load(bench.path, map_location="cpu")
    changed = False
    for name, value in reference.model.state_dict().items():
        assert torch.equal(saved[name], value), name
        changed |= not torch.equal(value, bench.model.state_dict()[name])
    assert changed  # the steps after the checkpoint moved the weights on
    bench.teardown()
    reference.teardown()


def test_uint8_normalize_matches_the_reference() -> None:
    normalize = load("baseline_uint8_transfer").normalize
    x = torch.randint(0, 256, (2, 5, 7, 3), dtype=torch.uint8)
    mean, std = torch.tensor([0.4, 0.5, 0.6]).view(3, 1, 1), torch.tensor([0.2, 0.25, 0.3]).view(3, 1, 1)
    got = normalize(x, mean, std, torch.empty(2, 3, 5, 7))
    torch.testing.assert_close(got, (x.permute(0, 3, 1, 2).float() / 255 - mean) / std)


@pytest.mark.parametrize(("n", "parts"), [(256, 8), (255, 8), (257, 8), (10, 3), (3, 8), (1, 1)])
def test_uint8_pipelined_chunks_cover_every_image_once(n: int, parts: int) -> None:
    got = load("optimized_uint8_transfer_pipelined").chunks(n, parts)
    assert [i for s in got for i in range(n)[s]] == list(range(n))
    assert len(got) == min(n, parts)
    assert max(s.stop - s.start for s in got) - min(s.stop - s.start for s in got) <= 1


def test_uint8_normalize_chunk_by_chunk_is_bitwise_the_whole_batch() -> None:
    """What the pipelined variant does on the GPU, done here on the CPU: normalize into each chunk's
    rows of ``out`` gives the same bits as one normalize of the whole batch."""
    normalize, chunks = load("baseline_uint8_transfer").normalize, load("optimized_uint8_transfer_pipelined").chunks
    x = torch.randint(0, 256, (11, 5, 7, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    whole, pieces = torch.empty(11, 3, 5, 7), torch.full((11, 3, 5, 7), float("nan"))
    normalize(x, mean, std, whole)
    for rows in chunks(11, 4):
        normalize(x[rows], mean, std, pieces[rows])
    assert torch.equal(pieces, whole)


def test_jpeg_pool_decodes_close_to_its_pixels() -> None:
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    mod = load("baseline_gpu_jpeg_decode")
    blobs = mod.encode_pool(mod.JpegWorkload(pool=2, size=64), seed=0)
    img = Image.open(io.BytesIO(blobs[0].numpy()))
    assert img.format == "JPEG" and img.size == (64, 64) and np.asarray(img.convert("RGB")).shape == (64, 64, 3)


def test_pread_into_fills_the_buffer_and_reports_a_short_file(tmp_path: Path) -> None:
    io_mod = load("ch05_io")
    path = tmp_path / "f.bin"
    io_mod.write_file(path, np.arange(64, dtype=np.uint8))
    dst = torch.empty(16, dtype=torch.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        io_mod.pread_into(fd, dst, 16)
        assert dst.tolist() == list(range(16, 32))
        with pytest.raises(EOFError):
            io_mod.pread_into(fd, dst, 56)
    finally:
        os.close(fd)


def test_disk_ceiling_measures_and_stores_beside_the_other_peaks(tmp_path: Path, monkeypatch) -> None:
    tool = load("disk_ceiling")
    found = tool.measure(tool.DiskConfig(size_mib=32, block_mib=4, repeats=1), tmp_path)
    assert found["disk_read"]["value"] > 0 and found["disk_write"]["value"] > 0
    assert "O_DIRECT" in found["disk_read"]["detail"] or "DONTNEED" in found["disk_read"]["detail"]
    assert list(tmp_path.iterdir()) == []
    peaks_dir = tmp_path / "peaks"
    peaks_dir.mkdir()
    monkeypatch.setenv("AISP_PEAK_DIR", str(peaks_dir))
    assert tool.store(found, None) is None, "no peaks file: nothing to add to"
    doc = {"measurements": {"matmul_fp32": {"value": 1.0, "unit": "TFLOP/s", "detail": "x"}}, "skipped": {},
           "errors": {}, "provenance": {"hardware_key": "cpu"}}
    (peaks_dir / "peak_cpu.json").write_text(json.dumps(doc))
    assert tool.store(found, None) == peaks_dir / "peak_cpu.json"
    stored = json.loads((peaks_dir / "peak_cpu.json").read_text())["measurements"]
    assert set(stored) == {"matmul_fp32", "disk_read", "disk_write"}
    assert load("ch05_io").disk_ceiling() == pytest.approx(found["disk_read"]["value"])


MOUNTS = """/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
overlay /work overlay rw 0 0
/dev/nvme0n1 /work/data xfs rw 0 0
"""


@pytest.mark.parametrize(("path", "fstype"), [("/tmp/x", "ext4"), ("/dev/shm/a", "tmpfs"), ("/work/src", "overlay"),
                                              ("/work/data/set", "xfs")])
def test_gds_check_finds_the_file_system_of_a_path(path: str, fstype: str) -> None:
    assert load("gds_check").mount_fstype(Path(path), MOUNTS) == fstype


def test_gds_check_verdicts() -> None:
    check = load("gds_check")
    good = [("nvidia-fs kernel module", True, ""), ("file system", True, ""), ("libcufile", True, ""),
            ("kvikio", False, ""), ("cuFile read into GPU memory", True, "")]
    assert check.verdict(good).startswith("GPUDirect Storage usable")
    compat = [("nvidia-fs kernel module", False, "")] + good[1:]
    assert "compatibility mode only" in check.verdict(compat) and "nvidia-fs" in check.verdict(compat)
    broken = compat[:-1] + [("cuFile read into GPU memory", False, "")]
    assert check.verdict(broken).startswith("no cuFile path")


def test_gds_check_says_why_not_on_this_machine(capsys) -> None:
    check = load("gds_check")
    assert check.main([]) == 0
    out = capsys.readouterr().out
    if not torch.cuda.is_available():
        assert "no CUDA GPU" in out and "no cuFile path" in out


@pytest.mark.parametrize("offsets", [[5, 0, 1, 2, 9, 3, 7, 8, 2, 2, 12, 11, 10], list(range(20)), [4], [3, 1]])
def test_file_order_runs_cover_each_read_once_in_back_to_back_runs(offsets: list[int]) -> None:
    size, cap = 16, 4
    starts = np.array(offsets, dtype=np.uint64) * size
    perm, heads, counts = load("ch05_uring").file_order_runs(starts, size, cap)
    assert sorted(perm.tolist()) == list(range(len(offsets))) and counts.sum() == len(offsets)
    assert list(starts[perm]) == sorted(starts.tolist())
    assert heads[0] == 0 and (heads[1:] == heads[:-1] + counts[:-1]).all() and counts.max() <= cap
    for h, c in zip(heads.tolist(), counts.tolist(), strict=True):
        run = starts[perm[h:h + c]].astype(np.int64)
        assert (np.diff(run) == size).all()
    # maximal: two runs side by side only where the cap or a gap (or the same offset again) splits them
    for h, c in zip(heads[1:].tolist(), counts[:-1].tolist(), strict=True):
        assert c == cap or int(starts[perm[h]]) != int(starts[perm[h - 1]]) + size


def test_ring_reads_rows_runs_and_reports_short_reads(tmp_path: Path) -> None:
    mod, size = uring(), 4096
    data = np.random.default_rng(0).integers(0, 256, 64 * size, dtype=np.uint8)
    path = tmp_path / "shard.bin"
    path.write_bytes(data.tobytes())
    offsets = np.array([9, 3, 4, 5, 60, 9, 0, 63, 1, 2], dtype=np.uint64) * size
    out, iov = np.zeros((len(offsets), size), np.uint8), np.empty((len(offsets), 2), np.uint64)
    fd, ring = os.open(path, os.O_RDONLY), mod.Ring(4)  # fewer slots than requests: two turns
    try:
        perm, heads, counts = mod.file_order_runs(offsets, size)
        assert counts.tolist() == [6, 1, 1, 1, 1]  # samples 0-5 (rows 6, 8, 9, 1, 2, 3), 9, 9, 60, 63
        ops, addrs, lens = mod.run_requests(perm, heads, counts, size, out.ctypes.data, iov)
        assert set(ops.tolist()) == {mod.OP_READ, mod.OP_READV}
        starts = offsets[perm[heads]]
        got = np.concatenate([ring.read(fd, starts[i:i + 4], addrs[i:i + 4], lens[i:i + 4], ops[i:i + 4])
                              for i in range(0, len(heads), 4)])
        assert got.tolist() == (counts * size).tolist()
        assert (out == data.reshape(64, size)[(offsets // size).astype(np.int64)]).all()
        short = ring.read(fd, np.array([63 * size + 100, 64 * size], np.uint64),
                          np.array([out.ctypes.data, out.ctypes.data + size], np.uint64), size)
        assert short.tolist() == [size - 100, 0]
        assert ring.read(fd, np.array([0], np.uint64), np.array([8], np.uint64), size).tolist() == [-14]  # EFAULT
    finally:
        ring.close()
        os.close(fd)


@pytest.mark.parametrize("failed", [False, True])
def test_uring_variant_in_several_turns_and_its_pread_fallback(failed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch larger than the ring goes in several turns; requests the kernel failed (here: all of
    them, none submitted) are read again by pread, so the batch still matches the baseline."""
    uring()
    mod = load("optimized_packed_shards_uring")
    monkeypatch.setattr(mod, "MAX_ENTRIES", 16)
    base, opt = build("baseline_packed_shards", 2), build("optimized_packed_shards_uring", 2)
    base.setup()
    opt.setup()
    assert opt.ring.entries == 16
    if failed:
        monkeypatch.setattr(opt.ring, "read", lambda fd, offsets, *rest: np.full(len(offsets), -5, np.int64))
    opt.out.fill_(7)
    torch.testing.assert_close(opt.run(), base.run(), atol=0, rtol=0)
    base.teardown()
    opt.teardown()


@pytest.mark.parametrize("bad", [-1, 1024])
def test_mmap_variant_reads_repeats_and_refuses_indices_outside_the_shard(bad: int) -> None:
    """np.take runs with mode="clip" (so it writes into the batch in place): the variant checks the
    indices itself, so one outside the shard raises instead of reading a clipped neighbour."""
    base, opt = build("baseline_packed_shards", 4), build("optimized_packed_shards_mmap", 4)
    base.setup()
    opt.setup()
    try:
        for bench in (base, opt):
            bench.order[:3] = bench.order[5]  # the same sample in four rows
        opt.out.fill_(7)
        torch.testing.assert_close(opt.run(), base.run(), atol=0, rtol=0)
        opt.order[-1] = bad
        with pytest.raises(IndexError):
            opt.run()
    finally:
        base.teardown()
        opt.teardown()
    assert not hasattr(opt, "map") and not hasattr(opt, "rows")
