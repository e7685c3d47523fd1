"""Baseline docker: the DataLoader a default container's 64 MiB /dev/shm allows.

Baseline: DataLoader workers hand every batch to the training process through shared memory
(/dev/shm). Docker gives a container 64 MiB there unless it is run with ``--ipc=host`` or
``--shm-size``; past that, workers die with "bus error". So the loader must keep at most 64 MiB of
batches in flight: with 12 MiB batches that is 2 workers x prefetch 2 (48 MiB; checked in
setup). Then 2 workers decode for a GPU that waits. Each batch goes through pinned staging
(non-blocking H2D copy), as in the optimized file. Nothing here runs Docker: this measures, on this
host, the loader each shared-memory budget permits.
Optimized (optimized_docker.py): what ``docker run --ipc=host`` (or ``--shm-size=16g``) allows: up
to 8 workers x prefetch 4 (384 MiB in flight); setup refuses to run if this host's /dev/shm cannot
hold it, rather than crashing in a worker. Same samples, same order, same outputs.
Expect: 2.02x measured on our 16-core H200 VM (545 -> 270 ms; decode-bound: 8 workers vs 2);
about 1x with 2-3 cores.
Run: python ch03/baseline_docker.py  |  aisp bench run -t ch03:docker
"""

from __future__ import annotations

from ch03_common import LoaderPipeline, batch_bytes, loader_workload

import aisp

DOCKER_DEFAULT_SHM = 64 << 20
"""What ``docker run`` mounts on /dev/shm without --shm-size or --ipc=host."""
WORKLOAD = loader_workload(window="idle",
                           ceiling_note="profiled (py-spy, 2-core CPU host): the workers' image synthesis (__getitem__) 51% of samples, _epoch 22%, collate 14%: decode-bound")


def in_flight_bytes(workers: int, prefetch: int) -> int:
    """Shared memory the loader's queued batches occupy at most."""
    return workers * prefetch * batch_bytes(WORKLOAD)


class SmallShmLoader(LoaderPipeline):
    workload = WORKLOAD
    workers = 2
    prefetch = 2

    def setup(self) -> None:
        self.check_shm(in_flight_bytes(self.workers, self.prefetch))
        super().setup()

    def check_shm(self, need: int) -> None:
        """Refuse a loader that would not fit the shared memory this variant stands for."""
        if need > DOCKER_DEFAULT_SHM:
            raise ValueError(f"{need >> 20} MiB in flight does not fit Docker's default 64 MiB /dev/shm")

    def metrics(self) -> dict[str, float]:
        return {"shm_in_flight_mib": in_flight_bytes(self.workers, self.prefetch) / 2**20,
                "workers": float(self.workers)}


def get_benchmark() -> aisp.Benchmark:
    return SmallShmLoader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
