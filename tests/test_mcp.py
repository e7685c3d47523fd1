"""``aisp mcp`` driven by the official SDK's client over stdio, on a CPU: the tools and their typed
schemas (none takes a tolerance, inputs or a seed); an honest kernel sent as source passes and a
cheating one (a cached answer) is rejected, also when the call adds a tolerance; a verify job on a
CPU pair runs to its result and compares with itself; bad calls are tool errors; a profile is
summarized and the host audit read. The sandbox's timeout kills a kernel that hangs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from aisp.mcp.policy import SandboxPolicy  # noqa: E402
from aisp.mcp.sandbox import KernelRequest, check_source  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOOLS = {"list_targets", "start_job", "job_status", "job_result", "compare_runs", "check_kernel",
         "summarize_profile", "host_audit"}
REFERENCE = "import torch\n\ndef softmax(x):\n    return torch.softmax(x.float(), -1).to(x.dtype)\n"
HONEST = "import torch\n\ndef fast(x):\n    return torch.softmax(x, -1)\n"
CACHED = """import torch

_seen = {}

def fast(x):
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _seen:
        _seen[key] = torch.softmax(x, -1)
    return _seen[key].clone()
"""
HANGS = "import time\n\ndef fast(x):\n    time.sleep(600)\n"
CASES = {"reference": "softmax", "reference_source": REFERENCE, "function": "fast", "shapes": ["RxC"],
         "dims": {"R": 4, "C": 33}}


def server(tmp_path: Path) -> StdioServerParameters:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return StdioServerParameters(command=sys.executable, args=["-m", "aisp", "mcp", "--work-dir", str(tmp_path),
                                                               "--device", "cpu"], env=env, cwd=str(REPO))


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def session(tmp_path: Path) -> dict[str, Any]:
    """One server, every tool call the test checks; what they returned."""
    seen: dict[str, Any] = {}
    async with Client(server(tmp_path)) as client:
        seen["tools"] = (await client.list_tools()).tools
        seen["targets"] = await call(client, "list_targets", chapter="ch01")
        seen["honest"] = await call(client, "check_kernel", source=HONEST, **CASES)
        seen["cached"] = await call(client, "check_kernel", source=CACHED, **CASES)
        seen["cached_loose"] = await client.call_tool("check_kernel", {"source": CACHED, **CASES, "atol": 10.0,
                                                                       "rtol": 10.0, "precision": "fp8"})
        seen["bad_target"] = await client.call_tool("start_job", {"action": "verify", "target": "ch01:no_such"})
        seen["bad_job"] = await client.call_tool("job_status", {"job_id": "nope"})
        job = await call(client, "start_job", action="verify", target="ch01:batch_size", device="cpu")
        deadline = time.monotonic() + 300
        while (await call(client, "job_status", job_id=job["job_id"]))["state"] == "running":
            assert time.monotonic() < deadline, "the verify job did not end"
            await anyio.sleep(0.2)
        seen["job"] = await call(client, "job_result", job_id=job["job_id"])
        run = seen["job"]["run_dir"]
        seen["compare"] = await call(client, "compare_runs", run_a=run, run_b=run)
        trace = REPO / "tests" / "fixtures" / "traces" / "gpu_busy.trace.json"
        seen["profile"] = await call(client, "summarize_profile", trace=str(trace))
        seen["audit"] = await call(client, "host_audit")
    return seen


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return anyio.run(session, tmp_path_factory.mktemp("mcp"))


def test_the_tools_are_typed_and_take_no_tolerance_inputs_or_seed(seen) -> None:
    tools = {t.name: t for t in seen["tools"]}
    assert set(tools) == TOOLS
    assert all(t.output_schema and t.input_schema.get("type") == "object" for t in tools.values())
    for tool in tools.values():
        assert not {"atol", "rtol", "tolerance", "precision", "inputs", "seed"} & set(tool.input_schema["properties"])
    assert set(tools["check_kernel"].input_schema["required"]) == {"source", "function", "reference", "shapes"}


def test_list_targets(seen) -> None:
    targets = [t["target"] for t in seen["targets"]["targets"]]
    assert "ch01:batch_size" in targets and all(t.startswith("ch01:") for t in targets)


def test_an_honest_kernel_passes(seen) -> None:
    honest = seen["honest"]
    assert honest["verdict"] == "ok" and honest["device"] == "cpu", honest
    labels = [c["label"] for c in honest["cases"]]
    assert labels[:3] == ["4x33 float32", "1x1 float32", "5x34 float32"]  # declared, then the edges
    assert honest["speedup"]["low"] <= honest["speedup"]["value"] <= honest["speedup"]["high"]


def test_a_cached_answer_sent_by_the_client_is_rejected(seen) -> None:
    cached = seen["cached"]
    assert cached["verdict"] == "verify-failed"
    assert cached["cases"][0]["check"] == "cached-answer" and "did not change" in cached["reason"]


def test_a_tolerance_in_the_call_changes_nothing(seen) -> None:
    loose = seen["cached_loose"]
    assert loose.is_error or loose.structured_content["verdict"] == "verify-failed"


def test_bad_calls_are_tool_errors(seen) -> None:
    assert seen["bad_target"].is_error and "ch01:no_such" in seen["bad_target"].content[0].text
    assert seen["bad_job"].is_error and "no job 'nope'" in seen["bad_job"].content[0].text


def test_a_verify_job_runs_to_its_result_and_compares(seen) -> None:
    job = seen["job"]
    assert job["status"]["state"] == "done" and job["status"]["exit_code"] == 0, job["status"]
    assert [(p["target"], p["verdict"]) for p in job["pairs"]] == [("ch01:batch_size", "ok")]
    pairs = seen["compare"]["pairs"]
    assert [p["target"] for p in pairs] == ["ch01:batch_size"]


def test_a_profile_and_the_host_audit(seen) -> None:
    assert seen["profile"]["kernel_count"] > 0 and seen["profile"]["top_kernels"]
    audit = seen["audit"]
    assert audit["exit_code"] in (0, 1, 3) and audit["findings"]
    assert sum(audit["counts"].values()) == len(audit["findings"])


def test_a_kernel_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    request = KernelRequest(HANGS, "fast", "softmax", REFERENCE, ["4x4"], {}, ["float32"])
    result = check_source(request, tmp_path, SandboxPolicy(timeout_s=4.0, device="cpu"))
    assert result.verdict == "timeout" and "timed out after 4 s" in result.reason


def test_a_kernel_that_does_not_parse_is_reported(tmp_path: Path) -> None:
    request = KernelRequest("def fast(x):\n    return (", "fast", "softmax", REFERENCE, ["4x4"], {}, ["float32"])
    result = check_source(request, tmp_path, SandboxPolicy(device="cpu"))
    assert result.verdict == "usage" and "cannot import" in result.reason and "SyntaxError" in result.reason


def test_a_job_past_its_limit_is_killed_with_its_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aisp.mcp import jobs as jobs_module

    monkeypatch.setattr(jobs_module, "DEFAULT_TIMEOUT_S", 0.0)
    monkeypatch.setattr(jobs_module, "SLACK_S", 1.0)  # the limit: 0 s a pair + 1 s
    jobs = jobs_module.Jobs(tmp_path)
    job_id = jobs.start("verify", "ch01:batch_size", "cpu").job_id
    deadline = time.monotonic() + 60
    while jobs.status(job_id).state == "running":
        assert time.monotonic() < deadline, "the job outlived its limit"
        time.sleep(0.2)
    assert jobs.status(job_id).state == "timeout" and jobs.status(job_id).exit_code is None


def test_stopping_the_server_ends_its_running_jobs(tmp_path: Path) -> None:
    from aisp.mcp.jobs import Jobs

    jobs = Jobs(tmp_path)
    job_id = jobs.start("verify", "ch01:batch_size", "cpu").job_id
    jobs.close()
    assert jobs.jobs[job_id].proc.poll() is not None and jobs.status(job_id).state == "failed"


def test_a_server_with_its_own_references_refuses_others(tmp_path: Path) -> None:
    policy = SandboxPolicy(device="cpu", references=("ch20.kernel_check_examples:softmax_reference",))
    sent = KernelRequest(HONEST, "fast", "softmax", REFERENCE, ["4x4"], {}, ["float32"])
    assert check_source(sent, tmp_path, policy).verdict == "usage"
    named = KernelRequest(CACHED, "fast", "ch20.kernel_check_examples:softmax_reference", None, ["RxC"],
                          {"R": 4, "C": 33}, ["float32"])
    result = check_source(named, tmp_path, policy)
    assert result.verdict == "verify-failed" and result.cases[0].check == "cached-answer"
