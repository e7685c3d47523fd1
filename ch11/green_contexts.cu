// green_contexts.cu: two green contexts that split the GPU's SMs between stream_priority's two jobs
// (optimized_stream_priority_green.py), and the joins between their streams and the caller's.
// Host code only; built as a shared library by aisp.kits.native (ch11/ch11_common.py).
//
// A green context (CUDA driver API, 12.4+) is the primary context restricted to a set of SMs: a
// kernel launched on one of its streams runs only there. cuDevSmResourceSplitByCount cuts the
// device's SMs into a group of at least `chain_sms` (sm_90: at least 8, a multiple of 8) and the
// remainder; each gets a green context and a stream, the chain's with its priority. PyTorch and
// the runtime launch on those streams like on any other (torch.cuda.ExternalStream).
//
// Events: cuEventRecord needs the event and the stream in the same context, while cuStreamWaitEvent
// takes an event of any context. So the fork records a primary-context event on the caller's stream
// that both green streams wait for, and the join records, on each green stream, an event made in
// that green context, which the caller's stream waits for. The chain's stream also records two
// timing events around its work (its latency inside a call).
//
// The driver functions come through cudaGetDriverEntryPointByVersion (no -lcuda), as in
// ch07/tma_tile_copy.cu. Every entry point returns 0 or a nonzero status; none launches work.
#include <cuda.h>
#include <cuda_runtime.h>

namespace {

constexpr int kDriverApi = 12050;  // cuGreenCtxStreamCreate's version; every function here exists by then
constexpr int kNoEntryPoint = 900000;
constexpr int kWrongSetup = 900001;

template <class F>
F entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(name, &fn, kDriverApi, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(fn);
}

struct Driver {
  decltype(&cuDeviceGet) device_get = entry<decltype(&cuDeviceGet)>("cuDeviceGet");
  decltype(&cuDeviceGetDevResource) get_resource = entry<decltype(&cuDeviceGetDevResource)>("cuDeviceGetDevResource");
  decltype(&cuDevSmResourceSplitByCount) split = entry<decltype(&cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount");
  decltype(&cuDevResourceGenerateDesc) describe = entry<decltype(&cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc");
  decltype(&cuGreenCtxCreate) create = entry<decltype(&cuGreenCtxCreate)>("cuGreenCtxCreate");
  decltype(&cuCtxFromGreenCtx) as_context = entry<decltype(&cuCtxFromGreenCtx)>("cuCtxFromGreenCtx");
  decltype(&cuGreenCtxStreamCreate) stream_create = entry<decltype(&cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate");
  decltype(&cuCtxPushCurrent) push = entry<decltype(&cuCtxPushCurrent)>("cuCtxPushCurrent");
  decltype(&cuCtxPopCurrent) pop = entry<decltype(&cuCtxPopCurrent)>("cuCtxPopCurrent");
  decltype(&cuEventCreate) event_create = entry<decltype(&cuEventCreate)>("cuEventCreate");
  decltype(&cuEventRecord) record = entry<decltype(&cuEventRecord)>("cuEventRecord");
  decltype(&cuStreamWaitEvent) wait = entry<decltype(&cuStreamWaitEvent)>("cuStreamWaitEvent");
  decltype(&cuEventElapsedTime) elapsed = entry<decltype(&cuEventElapsedTime)>("cuEventElapsedTime");

  bool complete() const {
    return device_get && get_resource && split && describe && create && as_context && stream_create && push && pop &&
           event_create && record && wait && elapsed;
  }
};

// The partition of one process (made once, kept until exit): [0] the chain's SMs, [1] the rest.
struct Partition {
  bool ready = false;
  int device = -1, requested = 0, priority = 0;
  unsigned sms[2] = {0, 0};
  CUgreenCtx ctx[2] = {};
  CUstream stream[2] = {};
  CUevent start = nullptr;           // primary context: recorded on the caller's stream
  CUevent done[2] = {};              // each in its green context: recorded on its stream
  CUevent chain_begin = nullptr, chain_end = nullptr;  // the chain's context, with timing
};

Partition part;

const Driver& driver() {
  static const Driver d;
  return d;
}

// Events made with green context `ctx` current (so they can be recorded on its streams).
CUresult green_events(const Driver& d, CUgreenCtx ctx, CUevent* done, CUevent* begin, CUevent* end) {
  CUcontext as_ctx = nullptr, popped = nullptr;
  CUresult r = d.as_context(&as_ctx, ctx);
  if (r != CUDA_SUCCESS) return r;
  if ((r = d.push(as_ctx)) != CUDA_SUCCESS) return r;
  r = d.event_create(done, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS && begin) r = d.event_create(begin, CU_EVENT_DEFAULT);
  if (r == CUDA_SUCCESS && end) r = d.event_create(end, CU_EVENT_DEFAULT);
  CUresult p = d.pop(&popped);
  return r != CUDA_SUCCESS ? r : p;
}

CUresult make_partition(const Driver& d, int device, int chain_sms, int priority) {
  CUdevice dev;
  CUresult r = d.device_get(&dev, device);
  if (r != CUDA_SUCCESS) return r;
  CUdevResource all = {}, group[2] = {};
  if ((r = d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS) return r;
  unsigned groups = 1;
  if ((r = d.split(&group[0], &groups, &all, &group[1], 0, static_cast<unsigned>(chain_sms))) != CUDA_SUCCESS) return r;
  if (groups != 1 || group[1].sm.smCount == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  for (int k = 0; k < 2; ++k) {
    CUdevResourceDesc desc;
    if ((r = d.describe(&desc, &group[k], 1)) != CUDA_SUCCESS) return r;
    if ((r = d.create(&part.ctx[k], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)) != CUDA_SUCCESS) return r;
    if ((r = d.stream_create(&part.stream[k], part.ctx[k], CU_STREAM_NON_BLOCKING, k == 0 ? priority : 0)) != CUDA_SUCCESS)
      return r;
    part.sms[k] = group[k].sm.smCount;
  }
  if ((r = green_events(d, part.ctx[0], &part.done[0], &part.chain_begin, &part.chain_end)) != CUDA_SUCCESS) return r;
  if ((r = green_events(d, part.ctx[1], &part.done[1], nullptr, nullptr)) != CUDA_SUCCESS) return r;
  return d.event_create(&part.start, CU_EVENT_DISABLE_TIMING);  // the caller's (primary) context is current
}

}  // namespace

// The partition for the current device, made on the first call: streams[0] the chain's (at least
// `chain_sms` SMs, priority `priority`), streams[1] the bulk's (the other SMs); sms[] their SM
// counts. Later calls return the same streams; a call with other arguments or another device fails.
extern "C" int green_init(int chain_sms, int priority, void** streams, int* sms) {
  if (chain_sms <= 0 || streams == nullptr || sms == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  const Driver& d = driver();
  if (!d.complete()) return kNoEntryPoint;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return static_cast<int>(cudaErrorNoDevice);
  if (!part.ready) {
    if (cudaFree(nullptr) != cudaSuccess) return static_cast<int>(cudaErrorInitializationError);  // primary context
    CUresult r = make_partition(d, device, chain_sms, priority);
    if (r != CUDA_SUCCESS) return static_cast<int>(r);
    part.ready = true;
    part.device = device;
    part.requested = chain_sms;
    part.priority = priority;
  }
  if (part.device != device || part.requested != chain_sms || part.priority != priority) return kWrongSetup;
  for (int k = 0; k < 2; ++k) {
    streams[k] = part.stream[k];
    sms[k] = static_cast<int>(part.sms[k]);
  }
  return 0;
}

// Both green streams wait for the work queued so far on `caller`; the chain's stream then records
// the start of its timed span.
extern "C" int green_fork(cudaStream_t caller) {
  if (!part.ready) return kWrongSetup;
  const Driver& d = driver();
  CUresult r = d.record(part.start, caller);
  for (int k = 0; k < 2 && r == CUDA_SUCCESS; ++k) r = d.wait(part.stream[k], part.start, 0);
  if (r == CUDA_SUCCESS) r = d.record(part.chain_begin, part.stream[0]);
  return static_cast<int>(r);
}

// The chain's stream records the end of its timed span; `caller` waits for everything queued so far
// on both green streams.
extern "C" int green_join(cudaStream_t caller) {
  if (!part.ready) return kWrongSetup;
  const Driver& d = driver();
  CUresult r = d.record(part.chain_end, part.stream[0]);
  for (int k = 0; k < 2 && r == CUDA_SUCCESS; ++k) {
    r = d.record(part.done[k], part.stream[k]);
    if (r == CUDA_SUCCESS) r = d.wait(caller, part.done[k], 0);
  }
  return static_cast<int>(r);
}

// The chain's span (fork to join) of the last call, in ms, once that call has completed.
extern "C" int green_chain_ms(float* ms) {
  if (!part.ready || ms == nullptr) return kWrongSetup;
  return static_cast<int>(driver().elapsed(ms, part.chain_begin, part.chain_end));
}
