"""Kernel names from the torch trace and from ncu reduced to the function names ncu filters on,
with names recorded on an H200 (ch17:moe_grouped_gemm's optimized variant, 2026-11-28): the trace
keeps PyTorch's CUTLASS grouped GEMM mangled, and ncu shortens ``index_add_``'s kernel into a name
whose angle brackets do not balance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aisp.profile.ncu import (
    function_name,
    mangled_function_name,
    parse_raw_csv,
    profile_command,
    select_kernels,
    top_launches,
)

NCU = Path(__file__).parent / "fixtures" / "ncu"
MOE_TRACE = NCU / "moe_grouped_gemm_optimized.kernels.trace.json"  # torch trace, kernel events only
MOE_CSV = NCU / "moe_grouped_gemm_optimized.raw.csv"  # ncu --csv --page raw of the same variant
GROUPED_GEMM = "device_kernel <<<(132, 1, 1), (384, 1, 1)>>>"
INDEX_ADD = "indexFuncLargeIndex <<<(1056, 1, 1), (128, 1, 1)>>>"

NAMES = [
    # ncu's shortened names (ch17, ch09): unbalanced brackets, a cast, ``::`` after the template
    ("void indexFuncLargeIndex<float, long, unsigned int, 2, 2, (int)-2, 1, unnamed>::ReduceAdd>"
     "(cuda::TensorInfo<T1, T3>, cuda::TensorInfo<const T1, T3>, cuda::TensorInfo<const T2, T3>, int, int, "
     "T3, T3, long, long, const T8 &, T1)", "indexFuncLargeIndex"),
    ("void at::indexFuncLargeIndex<float, long, unsigned int, 2, 2, (int)-2, 1, at::<unnamed>::ReduceAdd>"
     "(at::TensorInfo<T1, T3>, at::TensorInfo<const T1, T3>, at::TensorInfo<const T2, T3>, int, int, T3, T3, "
     "long, long, const T8 &, T1)", "indexFuncLargeIndex"),
    ("void vectorized_elementwise_kernel<4, void unnamed>::pow_tensor_scalar_kernel_impl<float, float>"
     "(TensorIteratorBase &, T2)::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)",
     "vectorized_elementwise_kernel"),
    ("void at::index_elementwise_kernel<128, 4, void at::gpu_index_kernel<void at::index_kernel_impl"
     "<at::OpaqueType<2>>(at::TensorIteratorBase &, c10::ArrayRef<long>, c10::ArrayRef<long>)::[lambda(char *, "
     "const char *, long) (instance 1)]>(at::TensorIteratorBase &, c10::ArrayRef<long>, c10::ArrayRef<long>, "
     "const T1 &, bool)::[lambda(int) (instance 1)]>(long, T3)", "index_elementwise_kernel"),
    ("void at::reduce_kernel<512, 1, at::ReduceOp<c10::BFloat16, at::AbsMaxOps<c10::BFloat16, float, "
     "c10::BFloat16>, unsigned int, c10::BFloat16, 4, 4>>(T3)", "reduce_kernel"),
    # the torch trace's names (CUPTI's demangler)
    ("void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true, at::native::(anonymous "
     "namespace)::ReduceAdd>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo"
     "<float const, unsigned int>)", "indexFuncLargeIndex"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous "
     "namespace)::CompareFunctor<long> >(at::TensorIteratorBase&, at::native::(anonymous namespace)::"
     "CompareFunctor<long> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::"
     "(anonymous namespace)::CompareFunctor<long> >(at::TensorIteratorBase&, at::native::(anonymous "
     "namespace)::CompareFunctor<long> const&)::{lambda(int)#1})", "elementwise_kernel"),
    ("at::native::(anonymous namespace)::fill_reverse_indices_kernel(long*, int, "
     "at::cuda::detail::IntDivider<unsigned int>)", "fill_reverse_indices_kernel"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 3, false, false>(float*, "
     "float const*, int, int, int, bool const*, int, bool)", "softmax_warp_forward"),
    ("void at::cuda::kernelHistogram1D<long, long, long, 1, 2, -1, (at::cuda::CUDAHistogramMemoryType)0, "
     "at::cuda::CUDA_tensor_histogram<long, long, false>(at::Tensor, at::Tensor, at::Tensor, long)::"
     "{lambda(long, long)#1}>(at::cuda::detail::TensorInfo<long, long>)", "kernelHistogram1D"),
    ("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, cutlass::bfloat16_t, "
     "cutlass::bfloat16_t, float, cute::tuple<int, int, int>, cute::tuple<long, cute::C<1>, cute::C<0> > >"
     "(cutlass::bfloat16_t*, cutlass::bfloat16_t*, long)", "prepare_grouped_gemm_data"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(T1::Params)", "Kernel2"),
    # no C++ name: Triton, cuBLAS (nvjet), cuDNN
    ("triton_red_fused__to_copy_abs_amax_clamp_clamp_min_div_gelu_0",
     "triton_red_fused__to_copy_abs_amax_clamp_clamp_min_div_gelu_0"),
    ("nvjet_sm90_tst_192x176_64x4_1x2_h_bz_coopB_NNT", "nvjet_sm90_tst_192x176_64x4_1x2_h_bz_coopB_NNT"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
     "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"),
]


@pytest.mark.parametrize(("name", "function"), NAMES)
def test_ncu_function_name_of_recorded_kernel_names(name: str, function: str) -> None:
    assert function_name(name) == function


def _traced_cutlass_name() -> str:
    return next(launch for launch in MOE_TRACE.read_text().split('"') if launch.startswith("_ZN7cutlass"))


def test_ncu_mangled_names_become_function_names() -> None:
    assert function_name(_traced_cutlass_name()) == "device_kernel"
    # written for this test: an unscoped kernel, one in an anonymous namespace, one in std::, a static one
    assert mangled_function_name("_Z14rmsnorm_kernelPKfPfi") == "rmsnorm_kernel"
    assert mangled_function_name("_ZN12_GLOBAL__N_16gatherILi4EEEvPf") == "gather"
    assert mangled_function_name("_ZNSt6detail4fillEPf") == "fill"
    assert mangled_function_name("_ZL4stepPf") == "step"


@pytest.mark.parametrize("name", ["_Zfoo", "_ZN99shortE", "_Z", "_ZNE"])
def test_ncu_names_not_mangled_after_all_are_kept(name: str) -> None:
    assert function_name(name) == name


def test_ncu_filter_asks_for_the_traced_cutlass_gemm_by_its_function_name(tmp_path: Path) -> None:
    launches = top_launches(MOE_TRACE, 3)
    assert launches == [GROUPED_GEMM, INDEX_ADD, "elementwise_kernel <<<(1048576, 1, 1), (128, 1, 1)>>>"]
    cmd = profile_command("ncu", ["python", "x.py"], tmp_path / "v.ncu-rep", [k.split(" <<<")[0] for k in launches])
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^(device_kernel|elementwise_kernel|indexFuncLargeIndex)$"


def test_ncu_report_of_the_recorded_variant_keeps_index_add_in_the_table() -> None:
    parsed = parse_raw_csv(MOE_CSV.read_text())
    assert INDEX_ADD in parsed and not any(k.startswith("T1 ") for k in parsed)
    top, matched = select_kernels(parsed, top_launches(MOE_TRACE, 3), 3)
    assert matched and list(top)[0] == INDEX_ADD
    assert top[INDEX_ADD]["demangled"].startswith("void indexFuncLargeIndex<float, long, unsigned int, 2, 2, (int)-2")


def test_many_launch_configurations_cap_the_profile_at_its_first_launches(tmp_path: Path) -> None:
    """A growing cache gives its kernels a grid per step: above MAX_CONFIGS configurations ncu profiles the
    first MAX_LAUNCHES launches (global filter) instead of one launch of each."""
    from aisp.profile.ncu import MAX_CONFIGS, MAX_LAUNCHES, launch_configs

    events = [{"ph": "X", "cat": "kernel", "name": "void cat_kernel<float>(float*)", "ts": float(i), "dur": 1.0,
               "args": {"grid": [i + 1, 1, 1], "block": [128, 1, 1]}} for i in range(MAX_CONFIGS + 5)]
    events.append({"ph": "X", "cat": "kernel", "name": "void other(int)", "ts": 0.0, "dur": 1.0,
                   "args": {"grid": [7, 1, 1], "block": [32, 1, 1]}})
    trace = tmp_path / "grow.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert launch_configs(trace, ["cat_kernel"]) == MAX_CONFIGS + 5
    assert launch_configs(trace, ["other"]) == 1
    capped = profile_command("ncu", ["python", "x.py"], tmp_path / "v.ncu-rep", ["cat_kernel"], MAX_CONFIGS + 5)
    assert capped[capped.index("--filter-mode") + 1] == "global"
    assert capped[capped.index("--launch-count") + 1] == str(MAX_LAUNCHES)
    each = profile_command("ncu", ["python", "x.py"], tmp_path / "v.ncu-rep", ["cat_kernel"], MAX_CONFIGS)
    assert each[each.index("--filter-mode") + 1] == "per-launch-config"
    assert each[each.index("--launch-count") + 1] == "1"
