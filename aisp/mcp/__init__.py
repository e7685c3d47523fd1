"""``aisp mcp``: the harness as a judge for agents, over the Model Context Protocol (stdio, the
official MCP Python SDK, the optional extra ``aisp[mcp]``). Tools list targets, run or verify
pairs as jobs, compare runs, check a kernel sent as source text in a worker process, summarize a
profile and read the host audit. No tool takes a tolerance or inputs: an agent cannot weaken a check."""
