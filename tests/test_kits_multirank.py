"""The multi-rank kit's GEMM carveout: set for the block, restored after it (also on an error), and
a no-op without CUDA. (SymmetricReduce needs NCCL and two GPUs: ch16's tp_decode_multigpu, which
uses it, runs on 2 x H200.)"""

from __future__ import annotations

import pytest
import torch

from aisp.kits import multirank


def test_carveout_is_set_inside_and_restored_after(monkeypatch) -> None:
    state = {"sms": None}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch._C, "_get_sm_carveout_experimental", lambda: state["sms"])
    monkeypatch.setattr(torch._C, "_set_sm_carveout_experimental", lambda n: state.update(sms=n))
    library = {"now": "cublas"}  # plain cuBLAS ignores the carveout: cuBLASLt inside the block

    def preferred(backend=None):
        library.update(now=backend or library["now"])
        return library["now"]

    monkeypatch.setattr(torch.backends.cuda, "preferred_blas_library", preferred)
    with multirank.gemm_carveout(16):
        assert state["sms"] == 16 and library["now"] == "cublaslt"
    assert state["sms"] is None and library["now"] == "cublas"
    with pytest.raises(RuntimeError), multirank.gemm_carveout(8):
        assert state["sms"] == 8
        raise RuntimeError("step failed")
    assert state["sms"] is None and library["now"] == "cublas"


def test_carveout_is_a_no_op_without_cuda_or_a_count(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(torch._C, "_set_sm_carveout_experimental", calls.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with multirank.gemm_carveout(16):
        pass
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with multirank.gemm_carveout(None):
        pass
    assert calls == []
