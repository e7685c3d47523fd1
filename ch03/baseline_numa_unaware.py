"""Baseline NUMA-unaware: a DataLoader pipeline left wherever the scheduler puts it.

Baseline: one epoch of 2,048 synthetic 3x128x128 images (decoded in DataLoader workers, 12 MiB
batches through /dev/shm), each batch copied into a pinned staging buffer and sent to the GPU.
Nothing is bound: workers, the main thread and its intra-op thread pool float over every CPU the
process may use, and the staging buffers land on whichever node the allocating thread ran on. On a
two-socket host, for the GPUs of the far socket, decode output and staging cross the CPU
interconnect (UPI/xGMI) on every batch and the threads compete with each other for cores.
Optimized (optimized_numa_unaware.py): the same pipeline bound to the GPU's NUMA node: each worker
on its own local core, the main thread on the remaining local cores with its thread pool sized to
them, and the staging buffers allocated from the local node (set_mempolicy). Same work, same bytes.
Expect: on a two-socket host with the GPU on the far node, more than the CPU-placement gain alone.
Our H200 VM has one NUMA node, so no memory is remote and only the CPU-affinity effect remains:
1.23x measured there (301.6 -> 245.5 ms; main thread migrations 8 -> 2 per run), from workers on
their own cores and a main thread pool sized to its cores (metrics: main_thread_migrations,
staging_local_fraction, numa_nodes).
Run: python ch03/baseline_numa_unaware.py  |  aisp bench run -t ch03:numa_unaware
"""

from __future__ import annotations

import torch
from ch03_common import LoaderPipeline, loader_workload

import aisp
from aisp.system import numa

WORKLOAD = loader_workload(window="idle",
                           ceiling_note="profiled (py-spy, 2-core CPU host): the workers' __getitem__ 49-54% of samples, _epoch 21%, collate 12-15%: decode-bound")


class UnboundPipeline(LoaderPipeline):
    workload = WORKLOAD
    workers = WORKLOAD.workers
    prefetch = WORKLOAD.prefetch

    def setup(self) -> None:
        super().setup()
        self.locality = numa.device_locality(self.device.type, self.device.index or 0)
        self.moves = 0

    def run(self) -> torch.Tensor:
        before = numa.migrations()
        out = super().run()
        after = numa.migrations()
        self.moves = after - before if before is not None and after is not None else -1
        return out

    def metrics(self) -> dict[str, float]:
        placed = numa.pages_by_node(self.staging[0].data_ptr())
        local = placed.get(self.locality.node, 0) if self.locality.node is not None else 0
        out = {"numa_nodes": float(len(numa.node_cpus()) or 1),
               "staging_local_fraction": local / sum(placed.values()) if placed else float("nan")}
        if self.moves >= 0:
            out["main_thread_migrations"] = float(self.moves)
        return out


def get_benchmark() -> aisp.Benchmark:
    return UnboundPipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
