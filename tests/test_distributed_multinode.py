"""The multi-node launch files, validated offline: the Kubernetes manifest parses and hangs together
(indexed Job, headless Service, rendezvous on pod 0, GPUs in limits, NVLink multicast off), the
SLURM script passes bash -n (and shellcheck where installed), and both hand torchrun arguments
that torchrun's own parser accepts."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from conftest import REPO
from torch.distributed.run import get_args_parser

from aisp.harness.distributed import NVLS_OFF

MULTINODE = REPO / "ch13" / "multinode"
SBATCH = MULTINODE / "slurm_torchrun.sbatch"


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict]:
    docs = list(yaml.safe_load_all((MULTINODE / "torchrun_job.yaml").read_text()))
    return {doc["kind"]: doc for doc in docs}


def _container(manifest: dict[str, dict]) -> dict:
    (container,) = manifest["Job"]["spec"]["template"]["spec"]["containers"]
    return container


def _torchrun_args(manifest: dict[str, dict]):
    container = _container(manifest)
    assert container["command"] == ["python", "-m", "torch.distributed.run"]
    args = [a.replace("$(NODE_RANK)", "0") for a in container["args"]]
    return get_args_parser().parse_args(args)


def test_manifest_is_an_indexed_job_and_a_headless_service(manifest):
    assert set(manifest) == {"Service", "Job"}
    service, job = manifest["Service"], manifest["Job"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["backoffLimit"] == 0
    assert spec["template"]["spec"]["subdomain"] == service["metadata"]["name"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_manifest_rendezvous_is_consistent(manifest):
    args = _torchrun_args(manifest)
    job, service = manifest["Job"], manifest["Service"]
    assert int(args.nnodes) == job["spec"]["completions"] == job["spec"]["parallelism"]
    assert args.master_addr == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert args.master_port in [p["port"] for p in service["spec"]["ports"]]
    assert args.max_restarts == 0
    env = {e["name"]: e for e in _container(manifest)["env"]}
    rank_source = env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert rank_source == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert (REPO / args.training_script).exists()


def test_manifest_asks_for_one_gpu_per_rank(manifest):
    args = _torchrun_args(manifest)
    limits = _container(manifest)["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) == int(args.nproc_per_node)


def test_manifest_keeps_nvlink_multicast_off(manifest):
    env = {e["name"]: e.get("value") for e in _container(manifest)["env"]}
    assert {k: env.get(k) for k in NVLS_OFF} == NVLS_OFF


def test_sbatch_is_valid_bash():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_sbatch_passes_shellcheck():
    proc = subprocess.run(["shellcheck", str(SBATCH)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def _directives(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))


def test_sbatch_launches_one_agent_per_node_with_a_rank_per_gpu():
    text = SBATCH.read_text()
    directives = _directives(text)
    assert directives["ntasks-per-node"] == "1"
    default_gpus = re.search(r'GPUS_PER_NODE="\$\{GPUS_PER_NODE:-(\d+)\}"', text).group(1)
    assert directives["gpus-per-node"] == default_gpus
    launch = text[text.index("srun "):].replace("\\\n", " ").splitlines()[0]
    words = shlex.split(launch)
    torchrun = words[words.index("torch.distributed.run") + 1:]
    values = {"$SLURM_JOB_NUM_NODES": directives["nodes"], "$GPUS_PER_NODE": default_gpus,
              "$SLURM_JOB_ID": "1", "$HEAD_NODE:$RDZV_PORT": "node1:29500", "$SCRIPT": "ch13/fsdp_example.py",
              "$@": ""}
    for name, value in values.items():
        torchrun = [w.replace(name, value) for w in torchrun]
    args = get_args_parser().parse_args([w for w in torchrun if w])
    assert args.nnodes == directives["nodes"] and args.nproc_per_node == default_gpus
    assert args.rdzv_backend == "c10d" and args.rdzv_endpoint == "node1:29500"
    assert "--kill-on-bad-exit=1" in words


def test_sbatch_keeps_nvlink_multicast_off():
    text = SBATCH.read_text()
    for name, value in NVLS_OFF.items():
        assert re.search(rf"^export {name}={value}$", text, re.M), name
