"""Run by tests/test_ch04_device_put.py on two gloo ranks (torchrun): the host-driven ring of
ch04:device_initiated_put_multigpu checked as the harness checks it against the ring computed in one
process, a ring that loses a hop, ch04_nvshmem.join's unique-id broadcast, and ch04_nvshmem.alloc's
P2P agreement with one rank unreachable.
Each rank writes its report to ``<out>/rank<r>.json``."""

from __future__ import annotations

import ctypes
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from conftest import REPO
from test_ch04_pairs import check_pair

import aisp
from aisp.harness.loader import import_module_at
from aisp.kits.multirank import script_init, world_and_rank

BASE = import_module_at(REPO / "ch04" / "baseline_device_initiated_put_multigpu.py")
NVSHMEM = import_module_at(REPO / "ch04" / "ch04_nvshmem.py")
SMALL = replace(BASE.WORKLOAD, width=256, rounds=4, requires=aisp.Requirements(ranks=2))


class InOneProcess(BASE.HostDrivenRing):
    """Every stage of the ring computed here; this rank's outputs kept."""

    def run(self) -> torch.Tensor:
        x = self.x0
        for k in range(self.workload.rounds):
            for r, gain in enumerate(self.gains):
                x = BASE.reference_stage(x, gain)
                if r == self.rank:
                    self.out[k] = x
        return self.out


class LostHop(BASE.HostDrivenRing):
    """Rank 0 receives the last rank's output, then stages x0 again."""

    def stage(self, x: torch.Tensor, out: torch.Tensor) -> None:
        super().stage(self.x0 if self.rank == 0 else x, out)


class Unreachable:
    """ring_alloc as NVSHMEM answers it when rank 1 cannot store into its next rank's memory."""

    freed = False

    def ring_alloc(self, width, rounds, inbox, sig, reachable) -> int:
        reachable._obj.value = int(world_and_rank()[1] != 1)
        return 0

    def ring_free(self, inbox, sig) -> int:
        self.freed = True
        return 0


class Bootstrap:
    """The ring_* calls of NVSHMEM's bootstrap before its initialization; rank 0's id is known bytes."""

    joined: list | None = None

    def ring_ready(self) -> int:
        return 0

    def ring_uid_size(self) -> int:
        return 128

    def ring_get_uid(self, buf) -> int:
        ctypes.memmove(buf, b"rank 0's id", 11)
        return 0

    def ring_init(self, uid: bytes, rank: int, world: int) -> int:
        self.joined = [uid[:11].decode(), rank, world]
        return 0


def main(out: Path) -> None:
    script_init("cpu")
    report = {"ring": check_pair(BASE.HostDrivenRing(), InOneProcess(), SMALL),
              "lost_hop": check_pair(InOneProcess(), LostHop(), SMALL)}
    boot = Bootstrap()
    NVSHMEM.join(boot)
    report["join"] = boot.joined
    lib = Unreachable()
    try:
        NVSHMEM.alloc(lib, 8, 2, torch.device("cpu"))
    except aisp.Unavailable as exc:
        report["p2p"] = [str(exc), lib.freed]
    (out / f"rank{world_and_rank()[1]}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()  # gloo's threads stopped before exit (else, at times, an abort there)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
