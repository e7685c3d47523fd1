"""A small LLM serving kit the inference chapters share (15, 16, 17, 18, 20).

* :mod:`.config` / :mod:`.model`: a Llama-shaped decoder (RMSNorm, RoPE, GQA, SwiGLU), weights
  from a seed, bf16 on a GPU and fp32 on a CPU; a forward may mix segments (decode rows and a
  prefill chunk);
* :mod:`.cache`: a preallocated (dense) KV cache and a paged one (page pool + block table);
* :mod:`.requests`: a seeded synthetic request stream (prompt/output lengths, arrivals);
* :mod:`.sampling`: greedy and top-p; :mod:`.engine`: prefill, decode, static and continuous
  batching (with a per-token hook for latency tools); :mod:`.metrics`: TTFT, TPOT, tokens/s and
  goodput.

Not yet measured on a GPU: chapter 15's pairs are its first users; tests/test_ch15_gpu.py checks
the bf16 loops agree there.
"""

from aisp.kits.llm.cache import DenseKVCache, PagedKVCache, PageLayout, PagePool, pages_for
from aisp.kits.llm.config import LLMConfig
from aisp.kits.llm.engine import (
           TOP,
           ContinuousBatcher,
           Generated,
           decode,
           finish,
           prefill,
           right_pad,
           static_generate,
)
from aisp.kits.llm.metrics import SLO, RequestTimes, summarize
from aisp.kits.llm.model import Decoder, Segment, build_decoder
from aisp.kits.llm.requests import Request, StreamConfig, request_stream
from aisp.kits.llm.sampling import greedy, greedy_top, top_p

__all__ = ["SLO", "TOP", "ContinuousBatcher", "Decoder", "DenseKVCache", "Generated", "LLMConfig", "PageLayout",
           "PagePool", "PagedKVCache", "Request", "RequestTimes", "Segment", "StreamConfig", "build_decoder", "decode", "finish",
           "greedy", "greedy_top", "pages_for", "prefill", "request_stream", "right_pad", "static_generate",
           "summarize", "top_p"]
