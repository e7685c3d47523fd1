// occupancy.cu: what the CUDA runtime says about the occupancy of chapter 6's kernels, for
// ch06/occupancy.py. It includes the pair sources, so the kernels are the ones the pairs run.
//   occ_attributes   registers, static shared memory, local memory, max threads per block
//                    (cudaFuncGetAttributes)
//   occ_blocks       resident blocks per SM at a block size (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
//   occ_suggest      block size with the highest occupancy and the grid that fills the GPU
//                    (cudaOccupancyMaxPotentialBlockSize)
//   occ_device       the SM limits the answers come from
#include "bank_conflicts.cu"
#include "ilp_accumulators.cu"
#include "launch_bounds.cu"
#include "occupancy_api.cu"
#include "vector_add.cu"
#include "vectorized_ops.cu"

struct KernelEntry {
  const char* name;
  const void* fn;
};

static const KernelEntry kKernels[] = {
    {"add_one_block", (const void*)add_one_block},
    {"add_grid_stride", (const void*)add_grid_stride},
    {"add_per_element", (const void*)add_per_element},
    {"add_blocked4", (const void*)add_blocked4},
    {"dequantize", (const void*)dequantize},
    {"dequantize4", (const void*)dequantize4},
    {"affine_rows", (const void*)affine_rows},
    {"horner_free", (const void*)horner_free},
    {"horner_bounded", (const void*)horner_bounded},
    {"horner_fitted", (const void*)horner_fitted},
    {"horner_chain", (const void*)horner_chain},
    {"horner_split", (const void*)horner_split},
    {"scores<0>", (const void*)scores<0>},
    {"scores<1>", (const void*)scores<1>},
    {"scores_swizzled", (const void*)scores_swizzled},
};

extern "C" int occ_count() { return (int)(sizeof(kKernels) / sizeof(kKernels[0])); }

extern "C" const char* occ_name(int i) { return (i >= 0 && i < occ_count()) ? kKernels[i].name : nullptr; }

// out: registers, static shared bytes, local bytes per thread, max threads per block.
extern "C" int occ_attributes(int i, int* out) {
  if (i < 0 || i >= occ_count()) return -1;
  cudaFuncAttributes attr;
  if (cudaError_t err = cudaFuncGetAttributes(&attr, kKernels[i].fn)) return (int)err;
  out[0] = attr.numRegs;
  out[1] = (int)attr.sharedSizeBytes;
  out[2] = (int)attr.localSizeBytes;
  out[3] = attr.maxThreadsPerBlock;
  return 0;
}

extern "C" int occ_blocks(int i, int block, int* blocks) {
  if (i < 0 || i >= occ_count()) return -1;
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kKernels[i].fn, block, 0);
}

extern "C" int occ_suggest(int i, int* min_grid, int* block) {
  if (i < 0 || i >= occ_count()) return -1;
  return (int)cudaOccupancyMaxPotentialBlockSize(min_grid, block, kKernels[i].fn, 0, 0);
}

// out: SMs, max threads per SM, registers per SM, shared bytes per SM, max blocks per SM,
// shared bytes the runtime reserves per block.
extern "C" int occ_device(int* out) {
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device)) return (int)err;
  const cudaDeviceAttr attrs[] = {cudaDevAttrMultiProcessorCount, cudaDevAttrMaxThreadsPerMultiProcessor,
                                  cudaDevAttrMaxRegistersPerMultiprocessor,
                                  cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                  cudaDevAttrMaxBlocksPerMultiprocessor, cudaDevAttrReservedSharedMemoryPerBlock};
  for (int k = 0; k < 6; ++k) {
    if (cudaError_t err = cudaDeviceGetAttribute(&out[k], attrs[k], device)) return (int)err;
  }
  return 0;
}
