# Container for the chapter's GPU jobs: NGC PyTorch, jemalloc actually preloaded, numactl, non-root.
#
# Build:  docker build -f ch03/docker_gpu_optimized.dockerfile -t aisp-ch03 .
# Run:    docker run --rm --gpus all --ipc=host --ulimit memlock=-1:-1 \
#             --cpuset-cpus=<the GPU's local CPUs> --cpuset-mems=<its node> aisp-ch03 python ch03/train.py
#   --ipc=host (or --shm-size=16g): DataLoader workers pass batches through /dev/shm; Docker's
#       default 64 MiB fails them with "bus error" (ch03:docker measures what the room buys).
#   --ulimit memlock=-1:-1: RDMA registration (NCCL over InfiniBand, GPUDirect) locks host memory.
#   --cpuset-cpus/--cpuset-mems: keep the container on its GPU's NUMA node
#       (ch03/numa_topology_script.sh prints them); train.py then binds each rank inside.
#   No --privileged: GPUs come from --gpus; RDMA needs --device=/dev/infiniband plus --cap-add=IPC_LOCK.
#   Host knobs (THP, governor, swappiness, persistence) cannot be set from a container: tune the host
#   (ch03/system_tuning.sh) and check from inside with `aisp system audit`.
FROM nvcr.io/nvidia/pytorch:25.08-py3

# Library package names (Ubuntu and Debian alike): libjemalloc2, libtcmalloc-minimal4.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libjemalloc2 libtcmalloc-minimal4 numactl \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(ldconfig -p | awk '/libjemalloc\.so\.2 /{print $NF; exit}')" /usr/local/lib/libjemalloc.so.2

# MALLOC_CONF does nothing unless jemalloc is loaded, so it is preloaded for every process here.
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=background_thread:true,dirty_decay_ms:10000,muzzy_decay_ms:10000 \
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    CUDA_DEVICE_ORDER=PCI_BUS_ID \
    PYTHONUNBUFFERED=1

WORKDIR /workspace/aisp
COPY pyproject.toml README.md ./
COPY aisp ./aisp
COPY ch03 ./ch03
# Keep NGC's PyTorch: install aisp without dependencies, then only the small ones it adds.
RUN pip install --no-cache-dir --no-deps . \
    && pip install --no-cache-dir "typer>=0.12" "rich>=13" "nvidia-ml-py>=12" "psutil>=5.9" "pyyaml>=6"

# Fails the build if the preload did not take (the loader only warns about a wrong path and goes on).
RUN python -c "import sys; sys.exit('libjemalloc' not in open('/proc/self/maps').read())"

RUN useradd --create-home --uid 1000 aisp && chown -R aisp /workspace/aisp
USER aisp
CMD ["python", "ch03/train.py"]
