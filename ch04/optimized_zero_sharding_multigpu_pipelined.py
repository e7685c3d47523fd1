"""Optimized optimizer step (2 GPUs), ZeRO pipelined by hand: copy-engine pushes into symmetric memory
in chunks, one fused Triton pass per chunk (mean, AdamW, bf16 cast), all captured in one CUDA graph.

Baseline (baseline_zero_sharding_multigpu.py): all-reduce the bf16 gradients, then AdamW over all 128
M fp32 master weights and moments on every rank. optimized_zero_sharding_multigpu.py (profiled, 2.12
ms): NCCL reduce-scatter 0.58 ms, a cast, AdamW on the shard 0.55, a cast (casts 0.29), NCCL
all-gather 0.55, in series. NCCL alone (1.13 ms) is past the 0.855 ms that is 80% of the 0.684 ms
NVLink ceiling: no overlap of NCCL calls can get there.
Optimized: the same shards (rank r updates [r S, (r+1) S), S = N/2, and holds only their optimizer
state), each cut into 16 chunks, nothing on NCCL:
- Gradients: a copy engine pushes this rank's bf16 gradients of the peer's shard, chunk by chunk, over
  NVLink into the peer's symmetric ``recv``; after each a put_signal (a one-warp kernel on a third
  stream, so the copies run back to back) tells the peer it landed.
- Update: per chunk the compute stream waits for that signal, then one Triton kernel averages the two
  bf16 gradients (rounded as NCCL's bf16 AVG rounds), steps AdamW on the fp32 state and writes the
  bf16 weights into this rank's slice of ``params`` (symmetric too): 30 B a parameter instead of the
  40 B of the cast, fused AdamW and cast kernels, and no fp32 gradient buffer.
- Weights: as each chunk is updated the copy engine pushes it into the peer's ``params``; one signal
  after the last. NVLink carries the reduce-scatter's and all-gather's bytes, from the copy engines
  (no SMs), while chunk k updates beside chunk k+1's gradients and chunk k-1's weights in flight.
A barrier opens each call (both ranks inside it: neither overwrites what the other still reads). On
gloo (the CPU tests) the same chunks travel by send/recv and the update runs in PyTorch ops.
Peak memory falls too: no fp32 gradient (256 MiB) nor separate bf16 shards; ``recv`` is 128 MiB.
Expect (measured, 2 x H200, 2026-11-29, two runs of 20 samples): 1.083 / 1.012 ms
against the NCCL variant's 2.119 / 2.078 in the same runs (1.96-2.05x), 63-68% of the ceiling
(estimated 0.75-0.95 ms, 72-91%; 80% is 0.855 ms).
Run: aisp bench run -t ch04:zero_sharding_multigpu
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from baseline_zero_sharding_multigpu import ReplicatedAdamW
from ch04_zero import adamw_pair_reference

import aisp
from aisp.kits.multirank import peer_view, world_and_rank

CHUNKS = 16
"""Pieces of a shard that travel and update in turn: more shorten the pipeline's fill and drain
(1/CHUNKS of a shard's push and update each), fewer cost fewer signals and kernel gaps."""


def chunk_bounds(shard: int, chunks: int = CHUNKS) -> list[tuple[int, int]]:
    """[start, end) of each chunk of a shard of ``shard`` parameters: ``chunks`` equal pieces (one where
    they would not divide it evenly)."""
    count = chunks if shard % chunks == 0 else 1
    size = shard // count
    return [(i * size, (i + 1) * size) for i in range(count)]


class PipelinedZero(ReplicatedAdamW):
    scratch = ("params", "recv")

    def prepare(self) -> None:
        self.world, self.rank = world_and_rank()
        n, self.graph = self.workload.params, None
        self.size = size = n // self.world
        self.master = self.master[self.rank * size:(self.rank + 1) * size].clone()
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(self.master), torch.zeros_like(self.master)
        self.steps = torch.zeros((), device=self.device)
        self.bounds = chunk_bounds(size)
        if self.world != 2 or dist.get_backend() != "nccl":  # gloo (CPU tests) or one rank: send/recv
            self.recv = torch.empty(size, dtype=torch.bfloat16, device=self.device)
            return
        import torch.distributed._symmetric_memory as symm_mem
        from ch04_zero_triton import adamw_pair_

        self.update = adamw_pair_
        sym = symm_mem.empty(n + size, dtype=torch.bfloat16, device=self.device)  # [params | recv]
        self.handle = symm_mem.rendezvous(sym, dist.group.WORLD.group_name)
        sym[:n].copy_(self.params)
        self.params, self.recv = sym[:n], sym[n:]
        remote = peer_view(self.handle, sym, 1 - self.rank)  # the peer's [params | recv]: not an attribute
        self.side, self.signals = torch.cuda.Stream(), torch.cuda.Stream(priority=-1)
        self.pushed, self.updated = ([torch.cuda.Event() for _ in self.bounds] for _ in range(2))
        start = self.master.clone()
        self.step(remote[:n], remote[n:])  # compiles the kernel; both ranks run it, then the state resets
        torch.cuda.synchronize()
        torch._foreach_zero_([self.exp_avg, self.exp_avg_sq, self.steps])
        self.master.copy_(start)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step(remote[:n], remote[n:])
        torch.cuda.synchronize()

    def step(self, peer_params: torch.Tensor, peer_recv: torch.Tensor) -> None:
        """One call on two GPUs: pushes on ``side``, their signals on ``signals``, updates on this stream."""
        main, peer, mine, theirs = torch.cuda.current_stream(), 1 - self.rank, self.rank * self.size, (1 - self.rank) * self.size
        self.steps += 1
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            self.handle.barrier(channel=0)  # both ranks inside this call
            for k, (a, b) in enumerate(self.bounds):
                peer_recv[a:b].copy_(self.grads[theirs + a:theirs + b])  # copy engine, over NVLink
                self.pushed[k].record()
        for k in range(len(self.bounds)):
            self.signals.wait_event(self.pushed[k])
            with torch.cuda.stream(self.signals):
                self.handle.put_signal(peer, channel=1 + k)  # chunk k is in the peer's recv
        for k, (a, b) in enumerate(self.bounds):
            self.handle.wait_signal(peer, channel=1 + k)  # the peer's gradients of chunk k are in recv
            self.update(self.master[a:b], self.exp_avg[a:b], self.exp_avg_sq[a:b], self.steps,
                        self.grads[mine + a:mine + b], self.recv[a:b], self.params[mine + a:mine + b])
            self.updated[k].record()
        with torch.cuda.stream(self.side):
            for k, (a, b) in enumerate(self.bounds):
                self.side.wait_event(self.updated[k])
                peer_params[mine + a:mine + b].copy_(self.params[mine + a:mine + b])  # copy engine
            self.handle.put_signal(peer, channel=1 + len(self.bounds))  # all my weights are in the peer's
        self.handle.wait_signal(peer, channel=1 + len(self.bounds))  # all the peer's weights are in mine
        main.wait_stream(self.side)
        main.wait_stream(self.signals)

    def run(self) -> torch.Tensor:
        if self.graph is not None:
            self.graph.replay()
            return self.params
        mine, theirs, peer = self.rank * self.size, (1 - self.rank) * self.size, 1 - self.rank
        self.steps += 1
        for a, b in self.bounds:  # the same chunks and update, by send/recv (gloo) or kept (one rank)
            self.exchange(self.grads[theirs + a:theirs + b], self.recv[a:b], self.grads[mine + a:mine + b], peer)
            adamw_pair_reference(self.master[a:b], self.exp_avg[a:b], self.exp_avg_sq[a:b], self.steps,
                                 self.grads[mine + a:mine + b], self.recv[a:b], self.params[mine + a:mine + b])
            self.exchange(self.params[mine + a:mine + b], self.params[theirs + a:theirs + b], None, peer)
        return self.params

    def exchange(self, send: torch.Tensor, recv: torch.Tensor, alone: torch.Tensor | None, peer: int) -> None:
        """``send`` to the peer while its counterpart arrives in ``recv``; in a world of one ``recv``
        takes ``alone`` (the mean of one rank's gradients is its own), if given."""
        if self.world == 1:
            if alone is not None:
                recv.copy_(alone)
            return
        ops = [dist.P2POp(dist.isend, send.contiguous(), peer), dist.P2POp(dist.irecv, recv, peer)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()


def get_benchmark() -> aisp.Benchmark:
    return PipelinedZero()


if __name__ == "__main__":
    aisp.main(get_benchmark)
