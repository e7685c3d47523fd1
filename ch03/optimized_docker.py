"""Optimized docker: the DataLoader ``--ipc=host`` / ``--shm-size`` allows.

Baseline (baseline_docker.py): 2 workers x prefetch 2, the most a default container's 64 MiB
/dev/shm holds with 12 MiB batches.
Optimized: up to 8 workers (one per spare core) x prefetch 4 keep 384 MiB of batches in flight in
/dev/shm, so decoding runs in parallel ahead of the GPU. setup() checks that this host's /dev/shm
has the room (inside a container: run it with --ipc=host or --shm-size=16g; see
docker_gpu_optimized.dockerfile) and refuses otherwise. Same pinned staging, same outputs.
Expect: 2.02x on our 16-core H200 VM; about 1x with 2-3 cores.
Run: python ch03/optimized_docker.py  |  aisp bench run -t ch03:docker
"""

from __future__ import annotations

import os

from baseline_docker import WORKLOAD, SmallShmLoader

import aisp


class LargeShmLoader(SmallShmLoader):
    workers = WORKLOAD.workers
    prefetch = WORKLOAD.prefetch

    def check_shm(self, need: int) -> None:
        st = os.statvfs("/dev/shm")
        free = st.f_bavail * st.f_frsize
        if free < need:
            raise RuntimeError(f"/dev/shm has {free >> 20} MiB free, this loader needs {need >> 20} MiB: "
                               "run the container with --ipc=host or --shm-size=16g")


def get_benchmark() -> aisp.Benchmark:
    return LargeShmLoader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
