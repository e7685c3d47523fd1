"""Multi-node runs meet through torchrun's c10d rendezvous (--nnodes, --rdzv-endpoint), the launch
ch13/multinode/slurm_torchrun.sbatch uses: two torchrun agents on this host play two nodes of
one gloo rank each, and the all-reduce spans both."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from conftest import REPO

CHECK = Path(__file__).resolve().parent / "rendezvous_check.py"


EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range where it can: bind(0) and outgoing
    connections take their ports from that range, so no other test's socket (gloo's, torchrun's) can
    take this one between this check and the rendezvous's bind, as it could a port bind(0) had just
    handed out and this function let go."""
    low = int(EPHEMERAL.read_text().split()[0]) if EPHEMERAL.exists() else 32768
    first = 20000 + os.getpid() % 5000  # two runs of this test at once (two checkouts) start apart
    for port in [*range(first, min(low, 29000)), *range(20000, min(first, low))]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # no port below the range here: one the kernel hands out
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_nodes_meet_through_c10d_rendezvous(tmp_path: Path):
    endpoint = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
           f"--rdzv-endpoint={endpoint}", "--rdzv-id=aisp-test", "--max-restarts=0", str(CHECK), str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    nodes = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    try:
        outputs = [node.communicate(timeout=180)[0] for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    assert [n.returncode for n in nodes] == [0, 0], outputs
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert {s["node"] for s in seen} == {0, 1} and all(s["world_size"] == 2 for s in seen)
    assert all(s["sum"] == 3.0 for s in seen), "the all-reduce spanned both nodes"
