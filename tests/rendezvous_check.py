"""Run by tests/test_multinode_rendezvous.py under torchrun, once per "node": one gloo rank each,
an all-reduce across the nodes, and what this rank saw written to OUT/rank<RANK>.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    seen = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "node": int(os.environ["GROUP_RANK"]),
            "sum": total.item()}
    (out / f"rank{seen['rank']}.json").write_text(json.dumps(seen))
    dist.barrier()
    dist.destroy_process_group()  # gloo's threads stopped before exit


if __name__ == "__main__":
    main(Path(sys.argv[1]))
