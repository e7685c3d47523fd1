"""Optimized guided decoding, graphed: with the grammar on the GPU, the whole constrained step is one CUDA graph.

Baseline (baseline_guided_decoding.py): the grammar's state machine on the host; per step a mask
gathered there, copied to the GPU, and a sync for the sampled tokens before the state can advance.
optimized_guided_decoding.py moves the compiled tables and the state to the GPU, so no step waits
on the host; but each step is still ~190 eager launches, and the host issuing them bounds the call
(profiled: GPU busy 13%, host gaps 189 ms of a 220 ms window).
Optimized here: because nothing in a step needs the host any more, the step can be captured. In
setup, one decode step (the decoder over a KV cache at a fixed address, attending to all prompt +
steps slots with those after a row's position masked, as ch16's decode_cuda_graph does), the grammar
mask ``blocked[state]``, the greedy pick, the state advance ``next_cls[state, cls[token]]`` and the
writes of the token and top logits into the call's output column are captured as one CUDA graph over
static buffers; the token feeds back into the graph's input. A call prefills eagerly (one forward
over the 64 x 128 prompt tokens), picks the first token, then replays the graph once a token.
The same tokens as the baseline (the harness checks; top logits at the bf16 defaults, the graphed
step attends to a longer, masked key range). On a CPU the step runs uncaptured (the tests).
Expect (measured, H200, 2026-12-01, two runs): 32.63 and 34.29 ms against the eager variant's 160.9 and
210.2 ms and the baseline's 193.2 and 251.9 (a host-bound pair, slower in the second run): 5.90x [5.66,
6.16] and 7.30x [7.23, 7.38] over the baseline, 4.9-6.1x over the eager variant (estimated 4-6x); the
host's issue 6.7-9.1 ms a call. 11% of the HBM floor: the GPU now runs 6,102 kernels a call back to back
(28.4 ms, 92% under 10 us; profiled), not the weights' bytes (see the baseline's ceiling note).
Run: python ch15/optimized_guided_decoding_graph.py  |  aisp bench run -t ch15:guided_decoding
"""

from __future__ import annotations

import torch
from optimized_guided_decoding import GuidedOnDevice

import aisp
from aisp.kits.llm import TOP, DenseKVCache, decode, greedy_top, prefill
from aisp.kits.llm.serving import dtype_on


class GraphedGuided(GuidedOnDevice):
    scratch = ("tok", "pos", "fsm", "column", "tokens", "top")

    def setup(self) -> None:
        super().setup()
        w, dev = self.workload, self.device
        self.kv_len = w.prompt + w.steps
        self.cache = DenseKVCache(w.model, w.batch, self.kv_len, dev, dtype_on(dev))
        self.tok = torch.zeros(w.batch, dtype=torch.long, device=dev)
        self.pos = torch.zeros(w.batch, dtype=torch.long, device=dev)
        self.fsm = torch.zeros(w.batch, dtype=torch.long, device=dev)
        self.column = torch.zeros(1, dtype=torch.long, device=dev)
        self.tokens = torch.zeros(w.batch, w.steps, dtype=torch.long, device=dev)
        self.top = torch.zeros(w.batch, w.steps, TOP, device=dev)
        self.graph = None
        if dev.type == "cuda":
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):  # warm up off the capture
                for _ in range(3):
                    self._prime()
                    self._step()
            torch.cuda.current_stream(dev).wait_stream(side)
            self._prime()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._step()

    def _prime(self) -> None:
        """Warm-up and capture inputs: token 0 at the last slot, which no real step reads before it
        writes it; the output column the last, which every call rewrites."""
        self.tok.zero_()
        self.pos.fill_(self.kv_len - 1)
        self.fsm.zero_()
        self.column.fill_(self.workload.steps - 1)

    def _pick(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``DeviceTable.pick``'s mask, greedy token and state advance, the rows' states (``fsm``) updated in place."""
        g = self.grammar
        token, top = greedy_top(logits.masked_fill(g.blocked[self.fsm], float("-inf")), TOP)
        self.fsm.copy_(g.next_cls[self.fsm, g.cls[token]])
        return token, top

    def _step(self) -> None:
        token, top = self._pick(decode(self.model, self.cache, self.tok, self.pos, self.kv_len))
        self.tokens.index_copy_(1, self.column, token[:, None])
        self.top.index_copy_(1, self.column, top[:, None])
        self.tok.copy_(token)
        self.pos.add_(1)
        self.column.add_(1)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        self.fsm.zero_()
        token, top = self._pick(prefill(self.model, self.cache, list(self.prompts)))
        self.tokens[:, 0], self.top[:, 0] = token, top
        self.tok.copy_(token)
        self.pos.fill_(w.prompt)
        self.column.fill_(1)
        for _ in range(w.steps - 1):
            if self.graph is None:
                self._step()
            else:
                self.graph.replay()
        return self.tokens, self.top

    def teardown(self) -> None:
        self.graph = None
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return GraphedGuided()


if __name__ == "__main__":
    aisp.main(get_benchmark)
