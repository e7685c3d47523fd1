// The optimized variant of device_initiated_put_multigpu: the whole ring in one kernel per GPU.
// Each round, PE p waits on the signal of its inbox slot (set by PE p-1), runs the stage on the
// message and puts the result into PE p+1's inbox with nvshmemx_putmem_signal_block: the block's
// threads store the message straight into the peer's memory over NVLink, then thread 0 sets the
// slot's signal there. No host, no launch and no protocol handshake per message.
//
// Slots and signals: inbox slot k of PE p>0 holds round k from PE p-1; slot k>=1 of PE 0 holds
// round k-1 from the last PE. A slot's signal is set to the call's epoch (1, 2, ... since the
// buffers were allocated), so nothing is reset between calls. A slot is rewritten only in the next
// call, and with rounds >= 2 the ring orders that write after the slot's consumer has read it
// (PE 0 starts call j+1 only after the last PE sent round R-2 of call j, which needed every PE's
// round R-2; a PE's slot R-1 is rewritten only after that PE has started call j+1).
#include <cstdint>
#include <cstring>

#include <nvshmem.h>
#include <nvshmemx.h>

#include "ring_stage.cuh"

namespace {

constexpr int kNotReady = 1001;     // ring_init has not succeeded in this process
constexpr int kNoMemory = 1002;     // nvshmem_malloc returned NULL
constexpr int kInitFailed = 1003;   // NVSHMEM's initialization failed (its log says why)
bool g_ready = false;

__global__ void __launch_bounds__(ring::kThreads)
    ring_kernel(const float* x0, const float* __restrict__ gain, float* out, float* inbox, uint64_t* sig,
                int width, int rounds, uint64_t epoch) {
  __shared__ float partial[ring::kThreads / 32];
  const int me = nvshmem_my_pe();
  const int next = (me + 1) % nvshmem_n_pes();
  for (int k = 0; k < rounds; ++k) {
    const float* in = x0;
    if (me != 0 || k > 0) {
      if (threadIdx.x == 0) nvshmem_signal_wait_until(sig + k, NVSHMEM_CMP_GE, epoch);
      __syncthreads();
      in = inbox + static_cast<size_t>(k) * width;
    }
    float* mine = out + static_cast<size_t>(k) * width;
    ring::rms_stage(in, gain, mine, width, partial);
    const int slot = next == 0 ? k + 1 : k;
    if (slot < rounds) {
      nvshmemx_putmem_signal_block(inbox + static_cast<size_t>(slot) * width, mine, width * sizeof(float),
                                   sig + slot, epoch, NVSHMEM_SIGNAL_SET, next);
    }
  }
}

}  // namespace

extern "C" int ring_uid_size() { return static_cast<int>(sizeof(nvshmemx_uniqueid_t)); }

// Whether ring_init has succeeded in this process (NVSHMEM stays initialized until it exits).
extern "C" int ring_ready() { return g_ready ? 1 : 0; }

// Rank 0: a fresh unique id (its bootstrap's address) into `out` (ring_uid_size() bytes).
extern "C" int ring_get_uid(void* out) {
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  const int status = nvshmemx_get_uniqueid(&id);
  std::memcpy(out, &id, sizeof(id));
  return status;
}

// Every rank, once per process, on its current CUDA device: joins the NVSHMEM job named by rank
// 0's unique id as PE `rank` of `world`. A later call returns 0 if it names the same place.
extern "C" int ring_init(const void* uid, int rank, int world) {
  if (g_ready) return nvshmem_my_pe() == rank && nvshmem_n_pes() == world ? 0 : kInitFailed;
  nvshmemx_uniqueid_t id;
  std::memcpy(&id, uid, sizeof(id));
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  int status = nvshmemx_set_attr_uniqueid_args(rank, world, &id, &attr);
  if (status) return status;
  // nvshmemx_init_attr() is this call followed by exit() on failure; a status is more useful here.
  int provided = 0;
  const nvshmemi_version_t version = {NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
                                      NVSHMEM_VENDOR_PATCH_VERSION};
  status = nvshmemi_init_thread(NVSHMEM_THREAD_SERIALIZED, &provided, NVSHMEMX_INIT_WITH_UNIQUEID, &attr, version);
  g_ready = status == 0;
  return status ? kInitFailed : 0;
}

// Collective: symmetric inbox (rounds x width fp32) and signals (rounds), zeroed on every PE before
// any PE returns. `*reachable`: whether this PE can store into the next PE's memory (P2P).
extern "C" int ring_alloc(int width, int rounds, void** inbox, void** sig, int* reachable) {
  if (!g_ready) return kNotReady;
  const size_t bytes = static_cast<size_t>(width) * rounds * sizeof(float);
  *inbox = nvshmem_malloc(bytes);
  *sig = nvshmem_malloc(static_cast<size_t>(rounds) * sizeof(uint64_t));
  if (*inbox == nullptr || *sig == nullptr) return kNoMemory;
  cudaError_t err = cudaMemset(*sig, 0, static_cast<size_t>(rounds) * sizeof(uint64_t));
  if (err == cudaSuccess) err = cudaMemset(*inbox, 0, bytes);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  nvshmem_barrier_all();
  *reachable = nvshmem_ptr(*sig, (nvshmem_my_pe() + 1) % nvshmem_n_pes()) != nullptr;
  return static_cast<int>(err);
}

// Collective: frees what ring_alloc returned (either may be NULL).
extern "C" int ring_free(void* inbox, void* sig) {
  if (!g_ready) return kNotReady;
  nvshmem_free(sig);
  nvshmem_free(inbox);
  return 0;
}

// One call of the ring on `stream`: every PE calls it once per call with the same `epoch`.
// The kernel waits on signals, so it goes through NVSHMEM's collective launch (cooperative).
extern "C" int ring_run(const float* x0, const float* gain, float* out, void* inbox, void* sig, int width,
                        int rounds, uint64_t epoch, cudaStream_t stream) {
  if (width <= 0 || rounds < 2) return static_cast<int>(cudaErrorInvalidValue);
  if (!g_ready) return kNotReady;
  float* slots = static_cast<float*>(inbox);
  uint64_t* signals = static_cast<uint64_t*>(sig);
  void* args[] = {&x0, &gain, &out, &slots, &signals, &width, &rounds, &epoch};
  return nvshmemx_collective_launch(reinterpret_cast<const void*>(ring_kernel), dim3(1), dim3(ring::kThreads),
                                    args, 0, stream);
}
