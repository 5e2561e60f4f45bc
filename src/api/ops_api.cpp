// The tensor-math ops at the C boundary: matrix products, binary and unary
// elementwise ops, the in-place accumulate and scale, reductions, norms,
// argmax and casts (the layers, losses, dropout and optimizer steps are in
// nn_api.cpp). Each checks its out-pointers, reads its options struct, looks
// its handles up (naming the argument), calls the ops layer (ops/ops.hpp) and
// hands the results out.
#include <cstdio>
#include <vector>

#include "api/ops_api.hpp"

using namespace hpu;
using namespace hpu::api;
using namespace hpu::ops;

namespace {

// o for the ops layer, its tensors looked up naming options->field; the
// ones a setting leaves unused are not looked up (activation_input without
// activation_backward, the AdamW fields without adamw).
MatmulOptions matmul_options(const hpuMatmulOptions_t &o) {
  MatmulOptions m;
  m.alpha = o.alpha, m.beta = o.beta, m.dtype = o.dtype;
  m.activation = o.activation, m.activation_backward = o.activation_backward;
  m.c = optional(o.c, "options->c");
  if (o.activation_backward != HPU_ACTIVATION_NONE)
    m.activation_input = optional(o.activation_input, "options->activation_input");
  m.pre_activation = optional(o.pre_activation, "options->pre_activation");
  m.bias = optional(o.bias, "options->bias");
  if (o.adamw) {
    const hpuAdamwOptions_t adamw = read_sized(o.adamw, hpuAdamwOptions_t HPU_ADAMW_OPTIONS_INIT, "options->adamw");
    m.adamw_exp_avg = input(o.adamw_exp_avg, "options->adamw_exp_avg");
    m.adamw_exp_avg_sq = input(o.adamw_exp_avg_sq, "options->adamw_exp_avg_sq");
    m.adamw = adamw_options(adamw, "options->adamw->param_copy");
    m.adamw_step = o.adamw_step;
  }
  return m;
}

// hpuMatmul: no epilogue.
TensorPtr plain_matmul(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  return ops::matmul(stream, a, b, MatmulOptions{});
}

// One binary op (op), as the operand macro calls it.
template <Binary op>
TensorPtr binary_op(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  return ops::binary(stream, op, a, b);
}

template <Binary op>
OperandGrads binary_op_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a,
                                const TensorPtr &b, bool want_a, bool want_b) {
  return ops::binary_backward(stream, op, grad_out, a, b, want_a, want_b);
}

}  // namespace

extern "C" {

// An op of two operands a and b (forward(stream, a, b)) and its backward,
// which computes the gradients asked for.
#define HPU_OPERANDS_OP_(Name, forward, backward)                                                             \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out) {         \
    HPU_API_BEGIN                                                                                             \
      check_out(out, "out");                                                                                  \
      TensorPtr ta = input(a, "a"), tb = input(b, "b");                                                       \
      give(out, forward(stream, ta, tb));                                                                     \
    HPU_API_END                                                                                               \
  }                                                                                                           \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a,            \
                                          hpuTensor_t b, hpuTensor_t *grad_a, hpuTensor_t *grad_b) {          \
    HPU_API_BEGIN                                                                                             \
      TensorPtr g = input(grad_out, "grad_out"), ta = input(a, "a"), tb = input(b, "b");                      \
      OperandGrads r = backward(stream, g, ta, tb, grad_a != nullptr, grad_b != nullptr);                     \
      give(grad_a, r.a);                                                                                      \
      give(grad_b, r.b);                                                                                      \
    HPU_API_END                                                                                               \
  }

HPU_OPERANDS_OP_(Mm, ops::mm, ops::mm_backward)
HPU_OPERANDS_OP_(Bmm, ops::bmm, ops::bmm_backward)

HPU_API hpuStatus_t hpuAddmm(hpuStream_t stream, hpuTensor_t bias, hpuTensor_t a, hpuTensor_t b, double beta,
                             double alpha, hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr c = input(bias, "bias"), ta = input(a, "a"), tb = input(b, "b");
    give(out, ops::addmm(stream, c, ta, tb, beta, alpha));
  HPU_API_END
}

HPU_API hpuStatus_t hpuAddmmBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t bias, hpuTensor_t a,
                                     hpuTensor_t b, double beta, double alpha, hpuTensor_t *grad_bias,
                                     hpuTensor_t *grad_a, hpuTensor_t *grad_b) {
  HPU_API_BEGIN
    TensorPtr g = input(grad_out, "grad_out"), ta = input(a, "a"), tb = input(b, "b"), c = input(bias, "bias");
    AddmmGrads r = ops::addmm_backward(stream, g, c, ta, tb, beta, alpha, grad_bias != nullptr, grad_a != nullptr,
                                       grad_b != nullptr);
    give(grad_bias, r.bias);
    give(grad_a, r.a);
    give(grad_b, r.b);
  HPU_API_END
}

HPU_OPERANDS_OP_(Matmul, plain_matmul, ops::matmul_backward)

HPU_API hpuStatus_t hpuMatmulEx(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, const hpuMatmulOptions_t *options,
                                hpuTensor_t *out) {
  HPU_API_BEGIN
    const hpuMatmulOptions_t o = read_sized(options, hpuMatmulOptions_t HPU_MATMUL_OPTIONS_INIT, "options");
    if (!o.c) check_out(out, "out");  // with c, the result is c: out may be NULL
    TensorPtr ta = input(a, "a"), tb = input(b, "b");
    give(out, ops::matmul(stream, ta, tb, matmul_options(o)));
  HPU_API_END
}

HPU_API hpuStatus_t hpuLinear(hpuStream_t stream, hpuTensor_t x, hpuTensor_t w, hpuTensor_t bias, hpuTensor_t *y) {
  HPU_API_BEGIN
    check_out(y, "y");
    TensorPtr tx = input(x, "x"), tw = input(w, "w"), tb = optional(bias, "bias");
    give(y, ops::linear(stream, tx, tw, tb));
  HPU_API_END
}

HPU_API hpuStatus_t hpuLinearBackward(hpuStream_t stream, hpuTensor_t grad_y, hpuTensor_t x, hpuTensor_t w,
                                      hpuTensor_t *grad_x, hpuTensor_t *grad_w, hpuTensor_t *grad_bias) {
  HPU_API_BEGIN
    TensorPtr g = input(grad_y, "grad_y"), tx = input(x, "x"), tw = input(w, "w");
    LinearGrads r = ops::linear_backward(stream, g, tx, tw, grad_x != nullptr, grad_w != nullptr,
                                         grad_bias != nullptr);
    give(grad_x, r.x);
    give(grad_w, r.w);
    give(grad_bias, r.bias);
  HPU_API_END
}


HPU_OPERANDS_OP_(Add, binary_op<Binary::add>, binary_op_backward<Binary::add>)
HPU_OPERANDS_OP_(Sub, binary_op<Binary::sub>, binary_op_backward<Binary::sub>)
HPU_OPERANDS_OP_(Mul, binary_op<Binary::mul>, binary_op_backward<Binary::mul>)
HPU_OPERANDS_OP_(Div, binary_op<Binary::div>, binary_op_backward<Binary::div>)

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
