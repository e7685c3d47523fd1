// aos_soa.cu: advance n particles' x by dt * vx, with the particles stored two ways.
//
//   array of structs  Particle {x, y, z, vx, vy, vz, mass, charge}: 32 bytes, one DRAM sector each.
//                     The kernel needs 8 of them (x, vx), but a sector is the smallest unit DRAM
//                     and L2 move: 32 bytes read per particle, 4x the useful bytes.
//   struct of arrays  eight arrays of n floats: x and vx are two dense streams, 8 bytes per particle,
//                     read 16 bytes per thread (float4) from contiguous memory.
//
// Same arithmetic (one fmaf per particle), same result bit for bit.
#include <cstdint>

struct alignas(32) Particle {
  float x, y, z, vx, vy, vz, mass, charge;
};
static_assert(sizeof(Particle) == 32, "one particle per 32-byte sector");

constexpr int kThreads = 256;
constexpr int kFieldX = 0, kFieldVx = 3;

__global__ void advance_aos(const Particle* __restrict__ p, float* __restrict__ out, float dt, long n) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n) out[i] = fmaf(dt, p[i].vx, p[i].x);
}

__global__ void advance_soa(const float4* __restrict__ x, const float4* __restrict__ vx, float4* __restrict__ out,
                            float dt, long n4) {
  const long i = (long)blockIdx.x * kThreads + threadIdx.x;
  if (i < n4) {
    const float4 a = x[i], v = vx[i];
    out[i] = make_float4(fmaf(dt, v.x, a.x), fmaf(dt, v.y, a.y), fmaf(dt, v.z, a.z), fmaf(dt, v.w, a.w));
  }
}

static unsigned blocks(long work) { return (unsigned)((work + kThreads - 1) / kThreads); }

// particles: n structs of 8 floats (an (n, 8) row-major tensor).
extern "C" int aos_advance(const float* particles, float* out, float dt, long n, cudaStream_t s) {
  if ((uintptr_t)particles % alignof(Particle)) return -1;
  advance_aos<<<blocks(n), kThreads, 0, s>>>(reinterpret_cast<const Particle*>(particles), out, dt, n);
  return (int)cudaGetLastError();
}

// fields: 8 arrays of n floats, one per member, back to back (an (8, n) row-major tensor); n % 4 == 0.
extern "C" int soa_advance(const float* fields, float* out, float dt, long n, cudaStream_t s) {
  if (n % 4 || ((uintptr_t)fields | (uintptr_t)out) % 16) return -1;
  advance_soa<<<blocks(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(fields + kFieldX * n),
                                                 reinterpret_cast<const float4*>(fields + kFieldVx * n),
                                                 reinterpret_cast<float4*>(out), dt, n / 4);
  return (int)cudaGetLastError();
}
