// The tensor-math ops at the C boundary: binary and unary elementwise ops,
// the in-place accumulate and scale, reductions, norms, argmax and casts
// (the layers, losses and dropout are in nn_api.cpp). Each checks its
// out-pointers, looks its handles up (naming the argument), calls the ops
// layer (ops/ops.hpp) and hands the results out.
#include <cstdio>
#include <vector>

#include "api/api.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

extern "C" {

#define HPU_BINARY_OP_(Name, op)                                                                      \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out) { \
    HPU_API_BEGIN                                                                                     \
      check_out(out, "out");                                                                          \
      TensorPtr ta = input(a, "a"), tb = input(b, "b");                                               \
      give(out, ops::binary(stream, op, ta, tb));                                                     \
    HPU_API_END                                                                                       \
  }                                                                                                   \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a,    \
                                          hpuTensor_t b, hpuTensor_t *grad_a, hpuTensor_t *grad_b) {  \
    HPU_API_BEGIN                                                                                     \
      TensorPtr g = input(grad_out, "grad_out"), ta = input(a, "a"), tb = input(b, "b");              \
      BinaryGrads r = ops::binary_backward(stream, op, g, ta, tb, grad_a != nullptr, grad_b != nullptr); \
      give(grad_a, r.a);                                                                              \
      give(grad_b, r.b);                                                                              \
    HPU_API_END                                                                                       \
  }

HPU_BINARY_OP_(Add, Binary::add)
HPU_BINARY_OP_(Sub, Binary::sub)
HPU_BINARY_OP_(Mul, Binary::mul)
HPU_BINARY_OP_(Div, Binary::div)

HPU_API hpuStatus_t hpuAddInplace(hpuStream_t stream, hpuTensor_t dst, hpuTensor_t src, double alpha) {
  HPU_API_BEGIN
    TensorPtr x = input(src, "src"), y = input(dst, "dst");
    ops::add_inplace(stream, y, x, alpha);
  HPU_API_END
}

HPU_API hpuStatus_t hpuScaleInplace(hpuStream_t stream, hpuTensor_t x, double alpha) {
  HPU_API_BEGIN
    TensorPtr t = input(x, "x");
    ops::scale_inplace(stream, t, alpha);
  HPU_API_END
}

#define HPU_UNARY_OP_(Name, op)                                                                    \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out) {             \
    HPU_API_BEGIN                                                                                  \
      check_out(out, "out");                                                                       \
      TensorPtr t = input(x, "x");                                                                 \
      give(out, ops::unary(stream, op, t));                                                        \
    HPU_API_END                                                                                    \
  }                                                                                                \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, \
                                          hpuTensor_t *grad_x) {                                   \
    HPU_API_BEGIN                                                                                  \
      check_out(grad_x, "grad_x");                                                                 \
      TensorPtr g = input(grad_out, "grad_out"), t = input(x, "x");                                \
      give(grad_x, ops::unary_backward(stream, op, g, t));                                         \
    HPU_API_END                                                                                    \
  }

HPU_UNARY_OP_(Exp, Unary::exp)
HPU_UNARY_OP_(Log, Unary::log)
HPU_UNARY_OP_(Tan, Unary::tan)
HPU_UNARY_OP_(Relu, Unary::relu)
HPU_UNARY_OP_(Gelu, Unary::gelu)
HPU_UNARY_OP_(Tanh, Unary::tanh)
HPU_UNARY_OP_(Sigmoid, Unary::sigmoid)

#define HPU_REDUCE_OP_(Name, op)                                                                              \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t x, const int *dims, int ndims, int keepdim,   \
                                hpuTensor_t *out) {                                                           \
    HPU_API_BEGIN                                                                                             \
      check_out(out, "out");                                                                                  \
      TensorPtr t = input(x, "x");                                                                            \
      give(out, ops::reduce(stream, op, t, dims, ndims, keepdim != 0));                                       \
    HPU_API_END                                                                                               \
  }                                                                                                           \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x,            \
                                          const int *dims, int ndims, int keepdim, hpuTensor_t *grad_x) {     \
    HPU_API_BEGIN                                                                                             \
      check_out(grad_x, "grad_x");                                                                            \
      TensorPtr g = input(grad_out, "grad_out"), t = input(x, "x");                                           \
      give(grad_x, ops::reduce_backward(stream, op, g, t, dims, ndims, keepdim != 0));                        \
    HPU_API_END                                                                                               \
  }

HPU_REDUCE_OP_(Sum, Reduce::sum)
HPU_REDUCE_OP_(Mean, Reduce::mean)

HPU_API hpuStatus_t hpuSquaredNorm(hpuStream_t stream, const hpuTensor_t *tensors, size_t count,
                                   hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    HPU_CHECK_ARG(tensors != nullptr, "tensors is NULL with count %zu", count);
    std::vector<TensorPtr> xs;
    for (size_t i = 0; i < count; ++i) {
      char arg[32];
      std::snprintf(arg, sizeof arg, "tensors[%zu]", i);
      xs.push_back(input(tensors[i], arg));
    }
    give(out, ops::squared_norm(stream, std::move(xs)));
  HPU_API_END
}

HPU_API hpuStatus_t hpuArgmax(hpuStream_t stream, hpuTensor_t x, int dim, int keepdim, hpuTensor_t *indices) {
  HPU_API_BEGIN
    check_out(indices, "indices");
    TensorPtr t = input(x, "x");
    give(indices, ops::argmax(stream, t, dim, keepdim != 0));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCast(hpuStream_t stream, hpuTensor_t x, hpuDataType_t dtype, hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr t = input(x, "x");
    give(out, ops::cast(stream, t, dtype));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCastBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x) {
  HPU_API_BEGIN
    check_out(grad_x, "grad_x");
    TensorPtr g = input(grad_out, "grad_out"), t = input(x, "x");
    give(grad_x, ops::cast_backward(stream, g, t));
  HPU_API_END
}

}  // extern "C"
