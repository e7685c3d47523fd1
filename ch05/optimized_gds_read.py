"""Optimized GDS read: cuFile reads straight into device memory (``torch.cuda.gds.GdsFile``).

Baseline (baseline_gds_read.py): cold POSIX reads into a pinned bounce buffer, then one H2D copy.
Optimized: the file is registered with cuFile once (``GdsFile(path, O_RDONLY)``: PyTorch adds
O_DIRECT and calls ``cuFileHandleRegister``); each 16 MiB chunk is one ``load_storage`` (a
``cuFileRead``) into its own device buffer, and the call returns them stacked. With GPUDirect
Storage (``nvidia-fs`` loaded, a supported file system on NVMe) the drive DMAs into HBM and the
host memory is never touched; without it cuFile's compatibility mode does O_DIRECT POSIX reads
through its own pinned buffers and copies: this variant then measures that mode, which
``python ch05/gds_check.py`` reports. PyTorch without cuFile support (``torch._C`` lacks the GDS
functions) or a cuFile that cannot register the file (no ``nvidia-fs``: the H200 machine here)
skips this variant with the reason (``aisp.Unavailable``).
Expect: estimate, not measured: 1.0-1.3x in compatibility mode, more with real GDS. On the H200
cuFileHandleRegister failed (2026-11-23: an error; 2026-11-26: skipped with the reason, "cuFile
cannot open data.bin: ...", no GDS-capable file system in the container).
Run: python ch05/optimized_gds_read.py  |  aisp bench run -t ch05:gds_read
"""

from __future__ import annotations

import os

import torch
import torch.cuda.gds
from baseline_gds_read import PosixRead
from ch05_io import drop_cache
from gds_check import torch_cufile_status

import aisp


class CuFileRead(PosixRead):
    """One cuFileRead per chunk into device memory."""

    scratch = ("parts",)

    def prepare(self) -> None:
        usable, why = torch_cufile_status()
        if not usable:
            raise aisp.Unavailable(f"torch.cuda.gds cannot be used here: {why} (python ch05/gds_check.py)")
        w = self.workload
        self.parts = [torch.empty(w.chunk_bytes, dtype=torch.uint8, device=self.device) for _ in range(w.chunks)]
        os.environ.setdefault("CUFILE_LOGFILE_PATH", str(self.folder / "cufile.log"))  # not into the cwd
        try:
            self.file = torch.cuda.gds.GdsFile(str(self.path), os.O_RDONLY)
        except RuntimeError as exc:  # e.g. no nvidia-fs module: "cuFileHandleRegister failed"
            raise aisp.Unavailable(f"cuFile cannot open {self.path.name}: {exc} (python ch05/gds_check.py)") from exc

    def run(self) -> torch.Tensor:
        self.log.start()
        drop_cache(self.path)
        for c, k in enumerate(self.order.tolist()):
            self.file.load_storage(self.parts[c].untyped_storage(), offset=k * self.workload.chunk_bytes)
        out = torch.stack(self.parts)
        torch.cuda.current_stream().synchronize()
        self.log.stop()
        return out

    def teardown(self) -> None:
        self.file = None
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return CuFileRead()


if __name__ == "__main__":
    aisp.main(get_benchmark)
