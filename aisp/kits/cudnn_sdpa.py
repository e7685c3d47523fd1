"""cuDNN's fused attention through cuDNN's own graph API, for the masks PyTorch's SDPA cannot hand to cuDNN.

``F.scaled_dot_product_attention`` reaches cuDNN's fused attention only for no mask or plain causal; a
sliding window (a causal band) goes to the memory-efficient kernel with a dense mask. cuDNN's SDPA node
takes the band itself (``diagonal_band_left_bound`` and ``_right_bound``, top-left aligned), so the
kernel visits only the key tiles inside it. The graph API is the ``nvidia-cudnn-frontend`` package
(import name ``cudnn``; the ``cudnn`` extra: ``pip install "aisp[cudnn]"``, 2-6 MB, no other
dependencies in the versions pinned there). It runs on the cuDNN library PyTorch already loaded.

:class:`BandAttention` builds one graph for given q, k, v and output tensors (their shapes, strides and
dtype) and runs it; the plan is the one cuDNN's heuristics rank first (mode A, then FALLBACK). On an
H200 that plan and the other three the heuristics offer were timed (2026-12-01, ch13 README).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from aisp.harness.benchmark import Requirements, Unavailable

REQUIRES = Requirements(cuda=True, packages=("cudnn",))
"""A pair variant built on this module: a CUDA GPU and the frontend (skipped with the package named)."""

_DTYPES = {torch.bfloat16: "BFLOAT16", torch.float16: "HALF"}


def band_bounds(span: int) -> tuple[int, int]:
    """cuDNN's (left, right) band bounds for "query i sees keys i - span + 1 .. i": key j is kept where
    i - left < j <= i + right (top-left aligned), so left = span and right = 0 (0 alone is causal)."""
    if span < 1:
        raise ValueError(f"span {span}: a query sees at least itself")
    return span, 0


def _frontend() -> Any:
    """The ``cudnn`` module, after PyTorch has loaded its cuDNN (the frontend binds to the loaded one)."""
    if torch.backends.cudnn.version() is None:
        raise Unavailable("this PyTorch build has no cuDNN")
    try:
        import cudnn
    except ImportError as err:  # the requirement names the package; this covers a broken install
        raise Unavailable(f"the cuDNN frontend (import cudnn) failed: {err}") from err
    return cudnn


class BandAttention:
    """softmax(q k^T / sqrt(d) over the keys j with i - span < j <= i) v, for (batch, heads, seq, dim)
    bf16 or fp16 q, k, v on a CUDA GPU, written into ``out`` (their shape). One cuDNN graph, built here
    for these tensors' shapes and strides; each call passes the tensors again (refilled in place or
    new ones of the same layout) and runs on PyTorch's current stream."""

    def __init__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, span: int) -> None:
        if q.device.type != "cuda":
            raise Unavailable("cuDNN attention needs a CUDA GPU")
        if q.dtype not in _DTYPES or not all(t.dtype == q.dtype for t in (k, v, out)):
            raise ValueError(f"BandAttention: q, k, v and out must share bf16 or fp16, got {q.dtype}, {k.dtype}, "
                             f"{v.dtype}, {out.dtype}")
        cudnn = self._cudnn = _frontend()
        self.layout = tuple((tuple(t.shape), t.stride()) for t in (q, k, v, out))
        io = getattr(cudnn.data_type, _DTYPES[q.dtype])
        self.handle = cudnn.create_handle()
        graph = cudnn.pygraph(handle=self.handle, io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT)
        self.q, self.k, self.v = (graph.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=io)
                                  for name, t in (("q", q), ("k", k), ("v", v)))
        left, right = band_bounds(span)
        self.o, _ = graph.sdpa(name="band", q=self.q, k=self.k, v=self.v, generate_stats=False,
                               attn_scale=1.0 / math.sqrt(q.shape[-1]),
                               diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                               diagonal_band_left_bound=left, diagonal_band_right_bound=right)
        self.o.set_output(True).set_dim(list(out.shape)).set_stride(list(out.stride())).set_data_type(io)
        try:
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
        except Exception as err:  # cudnnGraphNotSupportedError and kin: a shape or GPU cuDNN does not take
            raise Unavailable(f"cuDNN has no plan for this band attention: {err}".splitlines()[0]) from err
        self.graph = graph
        self.workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=q.device)

    def close(self) -> None:
        """Release the cuDNN handle (the graph and workspace go with this object); calls fail after it."""
        if self.handle is not None:
            self._cudnn.destroy_handle(self.handle)
            self.handle = None

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if self.handle is None:
            raise RuntimeError("BandAttention: closed")
        if tuple((tuple(t.shape), t.stride()) for t in (q, k, v, out)) != self.layout:
            raise ValueError("BandAttention: the tensors' shapes or strides differ from those the graph was built for")
        self._cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream(q.device).cuda_stream)
        self.graph.execute({self.q: q, self.k: k, self.v: v, self.o: out}, self.workspace, handle=self.handle)
        return out
