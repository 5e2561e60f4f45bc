// Matrix products: mm, bmm, addmm, matmul, linear, and their backwards, all
// over kernels::gemm (OpenBLAS sgemm on widened bf16 blocks).
#include <cmath>
#include <functional>
#include <optional>

#include "core/profiler.hpp"
#include "kernels/cast.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/nn.hpp"
#include "kernels/reduce.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"
#include "ops/optim.hpp"

using namespace hpu;
using namespace hpu::ops;
using kernels::GemmShape;

namespace {

// The type gemm writes from dt inputs: want itself when it can (f32 from bf16
// or f16 skips a rounding), else dt.
hpuDataType_t direct_type(hpuDataType_t dt, hpuDataType_t want) {
  return want == dt || (want == HPU_FLOAT32 && (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16)) ? want : dt;
}

// A gemm operand: matrix i of a batch starts `stride` elements after matrix
// i - 1 (0: one matrix shared by the batch); each matrix is stored row by row
// with row stride ld, or (trans) column by column with column stride ld.
struct Operand {
  TensorPtr t;     // of the run type
  int64_t ld;
  int64_t stride;
  bool trans = false;
};

// x (2 or 3 dims: [batch,] rows, cols) as a gemm operand of type dt: x itself
// when it has that type and stores its matrices row by row or column by
// column with any stride (a transposed or sliced view), else a dense copy
// queued on s.
Operand operand(Stream &s, const TensorPtr &x, hpuDataType_t dt) {
  const int nd = x->ndim();
  const int64_t rows = x->size(nd - 2), cols = x->size(nd - 1);
  const int64_t rs = x->strides()[nd - 2], cs = x->strides()[nd - 1];
  const int64_t bs = nd == 3 && x->size(0) > 1 ? x->strides()[0] : 0;
  if (x->dtype() == dt && bs >= 0 && rs >= 0 && cs >= 0) {
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) return {x, rows == 1 ? cols : rs, bs, false};
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) return {x, cols == 1 ? rows : cs, bs, true};
  }
  return {copy_as(s, x, dt), cols, rows * cols, false};
}

// x with all dims but the last folded into rows (dense when it is not
// already), as an operand of type dt.
Operand rows_operand(Stream &s, const TensorPtr &x, hpuDataType_t dt) {
  if (x->ndim() == 2) return operand(s, x, dt);
  return {as(s, x, dt), x->size(x->ndim() - 1), 0, false};
}

const char *elem(const TensorPtr &t, int64_t i) {
  return static_cast<const char *>(t->data()) + i * static_cast<int64_t>(t->element_size());
}

// What a product does as it stores its result (hpuMatmulOptions_t, checked).
struct Post {
  TensorPtr bias;  // contiguous, of the type C is computed in, one value per column
  kernels::Activation activation = kernels::Activation::none;
  kernels::Activation backward = kernels::Activation::none;
  TensorPtr backward_input;  // contiguous, of the result's type and shape
  TensorPtr into;            // C itself (contiguous, of the type C is computed in), written in place
  std::optional<AdamwArgs> adamw;  // into's step from the result (into f32)
};

// The activation passes of `post` over r (the result, contiguous), as
// separate ops: kernels::unary's relu, then its backward.
void activation_passes(Stream &s, const TensorPtr &r, const Post &post) {
  if (r->numel() == 0 || (post.activation == kernels::Activation::none && post.backward == kernels::Activation::none))
    return;
  enqueue(s, work({r.get(), r.get(), post.backward_input.get()}, *r), [=] {
    if (post.activation == kernels::Activation::relu)
      kernels::unary(kernels::Unary::relu, r->dtype(), r->data(), r->data(), r->numel());
    if (post.backward == kernels::Activation::relu)
      kernels::unary_backward(kernels::Unary::relu, r->dtype(), post.backward_input->data(), r->data(), r->data(),
                              r->numel());
  });
}

// A new tensor of `shape` and type want (or post.into) holding, for each of
// `batch` matrices, alpha op(A) op(B) + beta C, where C is first set by init
// (when given), then post's epilogue. With sum_batches the batch products are
// added into one m x n result (no epilogue). The bias needs k > 0 and beta 0.
TensorPtr product(Stream &s, hpuDataType_t dt, const GemmShape &shape, int64_t batch, float alpha, const Operand &a,
                  const Operand &b, hpuDataType_t want, const Dims &out_shape, bool sum_batches = false,
                  std::function<void(void *, hpuDataType_t)> init = {}, float beta = 0, const Post &post = {}) {
  hpuDataType_t cdt = direct_type(dt, want);
  if (sum_batches && dt != HPU_FLOAT64) cdt = HPU_FLOAT32;  // accumulate the batches in f32
  GemmShape g = shape;
  g.trans_a ^= a.trans;
  g.trans_b ^= b.trans;
  // The activations as C is stored when it has the result's type, else in
  // passes over the converted result.
  const bool in_gemm = cdt == want;
  TensorPtr c = post.into ? post.into : Tensor::empty(a.t->device(), cdt, out_shape);
  if (prof::on() && c->numel() > 0) {  // what the profiler shows for this operation
    auto mk = static_cast<uint64_t>(g.m * g.k), kn = static_cast<uint64_t>(g.k * g.n),
         mn = static_cast<uint64_t>(g.m * g.n), nb = static_cast<uint64_t>(batch);
    prof::annotate(nb * ((mk + kn) * a.t->element_size()) + mn * c->element_size() * (sum_batches ? 1 : nb),
                   2 * nb * mn * static_cast<uint64_t>(g.k));
  }
  if (c->numel() > 0)
    enqueue(s, [=] {
      GemmShape gm = g;
      kernels::Epilogue &ep = gm.ep;
      if (post.bias) ep.bias = post.bias->data();
      if (in_gemm) {
        ep.activation = post.activation, ep.backward = post.backward;
        if (post.backward_input) ep.backward_input = post.backward_input->data(), ep.ld_backward = g.n;
      }
      kernels::AdamwSink adamw;
      kernels::GemmSink sink;
      if (post.adamw) {
        const AdamwArgs &u = *post.adamw;
        adamw.param = c->data_as<float>();
        adamw.exp_avg = u.exp_avg->data_as<float>(), adamw.exp_avg_sq = u.exp_avg_sq->data_as<float>();
        if (u.copy) adamw.copy = u.copy->data(), adamw.copy_dt = u.copy->dtype();
        adamw.c = u.constants;
        sink = adamw.sink();
        ep.sink = &sink;
      }
      if (init) init(c->data(), cdt);
      if ((g.k == 0 || batch == 0) && !ep.sink) {
        if (init || (post.into && beta != 0.0f))
          kernels::binary_scalar(kernels::Binary::mul, cdt, c->data(), beta, c->data(), c->numel());
        else
          kernels::fill(c->data(), cdt, c->numel(), 0.0);
        if (in_gemm && ep.activation != kernels::Activation::none)
          kernels::unary(kernels::Unary::relu, cdt, c->data(), c->data(), c->numel());
        if (in_gemm && ep.backward != kernels::Activation::none)
          kernels::unary_backward(kernels::Unary::relu, cdt, ep.backward_input, c->data(), c->data(), c->numel());
        return;
      }
      if (!sum_batches) {
        kernels::gemm_batched(dt, gm, batch, alpha, a.t->data(), a.ld, a.stride, b.t->data(), b.ld, b.stride, beta,
                              c->data(), g.n, g.m * g.n, cdt);
        return;
      }
      for (int64_t i = 0; i < batch; ++i)
        kernels::gemm(dt, g, alpha, elem(a.t, i * a.stride), a.ld, elem(b.t, i * b.stride), b.ld, i ? 1.0f : 0.0f,
                      c->data(), g.n, cdt);
    });
  TensorPtr r = as(s, c, want);
  if (!in_gemm) activation_passes(s, r, post);
  return r;
}

struct Pair {
  TensorPtr a, b;
  hpuDataType_t dt;  // the run type
  std::shared_ptr<Stream> s;
};

// A forward's two operands after the autocast decision for `op`.
Pair forward_pair(const char *op, hpuStream_t stream, const TensorPtr &a, const char *an, const TensorPtr &b,
                  const char *bn) {
  Pair p;
  p.a = a;
  p.b = b;
  same_device(*p.a, an, *p.b, bn);
  require_floating(*p.a, an);
  require_floating(*p.b, bn);
  autocast::Decision d = autocast::decide(op, {p.a->dtype(), p.b->dtype()});
  hpuDataType_t ra = d.apply(p.a->dtype()), rb = d.apply(p.b->dtype(), 1);
  require_same_dtype(*p.a, an, ra, *p.b, bn, rb);
  p.dt = ra;
  p.s = stream_for(stream, *p.a);
  return p;
}

// A backward's gradient and operands: it runs in the gradient's type.
struct Grads {
  TensorPtr g, a, b;
  hpuDataType_t dt;
  std::shared_ptr<Stream> s;
};

Grads backward_pair(hpuStream_t stream, const TensorPtr &g, const char *gn, const TensorPtr &a, const char *an,
                    const TensorPtr &b, const char *bn) {
  Grads p;
  p.g = g;
  p.a = a;
  p.b = b;
  same_device(*p.g, gn, *p.a, an);
  same_device(*p.g, gn, *p.b, bn);
  require_floating(*p.g, gn);
  require_floating(*p.a, an);
  require_floating(*p.b, bn);
  p.dt = p.g->dtype();
  p.s = stream_for(stream, *p.g);
  return p;
}

void check_inner(const Tensor &a, const char *an, int64_t ka, const Tensor &b, const char *bn, int64_t kb) {
  if (ka != kb)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s and %s is %s: the inner sizes differ (%lld vs %lld)", an,
         a.str().c_str(), bn, b.str().c_str(), static_cast<long long>(ka), static_cast<long long>(kb));
}

// Copies a bias broadcast over an m x n result (strides from broadcast_strides).
std::function<void(void *, hpuDataType_t)> bias_init(const TensorPtr &bias, int64_t m, int64_t n) {
  Dims st;
  broadcast_strides(bias->shape(), Dims{m, n}, &st);
  return [bias, st, m, n](void *c, hpuDataType_t cdt) {
    int64_t shape[2] = {m, n}, dst[2] = {n, 1};
    kernels::copy_strided(bias->data(), bias->dtype(), st.data(), c, cdt, dst, 2, shape);
  };
}

// Product of all dims but the last.
int64_t leading(const Dims &d) {
  int64_t r = 1;
  for (int i = 0; i + 1 < d.n; ++i) r *= d[i];
  return r;
}

// ---- mm / bmm ---------------------------------------------------------------

struct MmShape {
  int64_t batch, m, k, n;
};

MmShape mm_shape(const Tensor &a, const Tensor &b, bool batched) {
  int nd = batched ? 3 : 2;
  require_ndim(a, "a", nd);
  require_ndim(b, "b", nd);
  int o = batched ? 1 : 0;
  if (batched && a.size(0) != b.size(0))
    fail(HPU_ERROR_INVALID_ARGUMENT, "a is %s and b is %s: the batch sizes differ", a.str().c_str(),
         b.str().c_str());
  check_inner(a, "a", a.size(o + 1), b, "b", b.size(o));
  return {batched ? a.size(0) : 1, a.size(o), a.size(o + 1), b.size(o + 1)};
}

Dims mm_dims(const MmShape &s, bool batched, int64_t rows, int64_t cols) {
  return batched ? Dims{s.batch, rows, cols} : Dims{rows, cols};
}

TensorPtr mm_or_bmm(bool batched, hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  Pair p = forward_pair(batched ? "bmm" : "mm", stream, a, "a", b, "b");
  MmShape sh = mm_shape(*p.a, *p.b, batched);
  Operand A = operand(*p.s, p.a, p.dt), B = operand(*p.s, p.b, p.dt);
  return product(*p.s, p.dt, {sh.m, sh.n, sh.k}, sh.batch, 1.0f, A, B, p.dt, mm_dims(sh, batched, sh.m, sh.n));
}

OperandGrads mm_or_bmm_backward(bool batched, hpuStream_t stream, const TensorPtr &g, const TensorPtr &a,
                                const TensorPtr &b, bool want_a, bool want_b) {
  Grads p = backward_pair(stream, g, "grad_out", a, "a", b, "b");
  MmShape sh = mm_shape(*p.a, *p.b, batched);
  require_shape(*p.g, "grad_out", mm_dims(sh, batched, sh.m, sh.n), "the forward's output shape");
  Operand G = operand(*p.s, p.g, p.dt);
  OperandGrads r;
  if (want_a)  // ga = G B^T
    r.a = product(*p.s, p.dt, {sh.m, sh.k, sh.n, false, true}, sh.batch, 1.0f, G, operand(*p.s, p.b, p.dt),
                  p.a->dtype(), p.a->shape());
  if (want_b)  // gb = A^T G
    r.b = product(*p.s, p.dt, {sh.k, sh.n, sh.m, true, false}, sh.batch, 1.0f, operand(*p.s, p.a, p.dt), G,
                  p.b->dtype(), p.b->shape());
  return r;
}

// ---- matmul ------------------------------------------------------------------

// torch.matmul's operands seen as [batch..., m, k] and [batch..., k, n]; the
// batch dims broadcast (right-aligned; equal, or 1 in one of them).
struct MatmulShape {
  Dims a_batch, b_batch;  // each operand's own batch dims
  Dims batch;             // the result's: their broadcast
  int64_t nbatch = 1;     // batch.numel()
  bool a_vec = false, b_vec = false;
  int64_t m = 1, k = 1, n = 1;
  Dims out;
};

MatmulShape matmul_shape(const Tensor &a, const Tensor &b) {
  if (a.ndim() < 1 || b.ndim() < 1)
    fail(HPU_ERROR_INVALID_ARGUMENT, "a is %s and b is %s: both need at least 1 dim", a.str().c_str(),
         b.str().c_str());
  MatmulShape s;
  s.a_vec = a.ndim() == 1;
  s.b_vec = b.ndim() == 1;
  s.m = s.a_vec ? 1 : a.size(a.ndim() - 2);
  s.k = a.size(a.ndim() - 1);
  int64_t kb = s.b_vec ? b.size(0) : b.size(b.ndim() - 2);
  s.n = s.b_vec ? 1 : b.size(b.ndim() - 1);
  check_inner(a, "a", s.k, b, "b", kb);
  for (int i = 0; i + 2 < a.ndim(); ++i) s.a_batch.v[s.a_batch.n++] = a.size(i);
  for (int i = 0; i + 2 < b.ndim(); ++i) s.b_batch.v[s.b_batch.n++] = b.size(i);
  s.batch.n = std::max(s.a_batch.n, s.b_batch.n);
  for (int i = s.batch.n - 1, ia = s.a_batch.n - 1, ib = s.b_batch.n - 1; i >= 0; --i, --ia, --ib) {
    int64_t da = ia >= 0 ? s.a_batch[ia] : 1, db = ib >= 0 ? s.b_batch[ib] : 1;
    if (da != db && da != 1 && db != 1)
      fail(HPU_ERROR_INVALID_ARGUMENT, "a is %s and b is %s: batch dims %s and %s do not broadcast",
           a.str().c_str(), b.str().c_str(), s.a_batch.str().c_str(), s.b_batch.str().c_str());
    s.batch[i] = da == 1 ? db : da;
  }
  s.nbatch = s.batch.numel();
  s.out = s.batch;
  if (!s.a_vec) s.out.v[s.out.n++] = s.m;
  if (!s.b_vec) s.out.v[s.out.n++] = s.n;
  return s;
}

// An operand x of matmul (rows x cols matrices, own batch dims `own`) over
// the result's batch: one shared matrix (stride 0) when x has no batch dims,
// else dense matrices, one per result batch entry: x itself when its batch
// dims are the result's, else a copy expanded over the dims it broadcasts.
Operand matmul_operand(Stream &s, const TensorPtr &x, hpuDataType_t dt, const Dims &own, const MatmulShape &sh,
                       int64_t rows, int64_t cols) {
  if (own.n == 0) return x->ndim() == 2 ? operand(s, x, dt) : Operand{as(s, x, dt), cols, 0};
  if (own == sh.batch) return {as(s, x, dt), cols, rows * cols};
  Dims shape = sh.batch, strides;
  shape.v[shape.n++] = rows;
  shape.v[shape.n++] = cols;
  strides.n = shape.n;
  const int skip = sh.batch.n - own.n;
  for (int i = 0; i < sh.batch.n; ++i) strides[i] = i < skip || own[i - skip] == 1 ? 0 : x->strides()[i - skip];
  strides[shape.n - 2] = x->strides()[x->ndim() - 2];
  strides[shape.n - 1] = x->strides()[x->ndim() - 1];
  return {copy_as(s, x->view(shape, strides, x->offset()), dt), cols, rows * cols};
}

// The gradient of a matmul operand x (own batch dims `own`, matrices rows x
// cols) from the per-batch products lhs_i op rhs_i (g: rows, cols, inner):
// written batch by batch when x has the result's batch dims, summed over the
// batch when x has none, else computed per result batch entry in f32 (f64)
// and summed over the dims x broadcasts.
TensorPtr matmul_grad(Stream &s, hpuDataType_t dt, const GemmShape &g, const MatmulShape &sh, const Dims &own,
                      const Operand &lhs, const Operand &rhs, const TensorPtr &x) {
  if (own == sh.batch || own.n == 0)
    return product(s, dt, g, sh.nbatch, 1.0f, lhs, rhs, x->dtype(), x->shape(), own.n == 0 && sh.nbatch > 1);
  Dims full_shape = sh.batch;
  full_shape.v[full_shape.n++] = g.m;
  full_shape.v[full_shape.n++] = g.n;
  TensorPtr full = product(s, dt, g, sh.nbatch, 1.0f, lhs, rhs, dt == HPU_FLOAT64 ? dt : HPU_FLOAT32, full_shape);
  TensorPtr grad = empty_like(*x, x->dtype(), x->shape());
  Dims to = pad_left(x->shape(), full_shape.n);
  if (grad->numel() > 0)
    enqueue(s, [=] {
      kernels::sum_to(full->dtype(), full->data(), full_shape.n, full_shape.data(), to.data(), 1.0, grad->dtype(),
                      grad->data());
    });
  return grad;
}

// A linear's backward operands, checked: grad_y [..., out], x [..., in], w [out, in].
struct LinearArgs : Grads {
  int64_t rows, in, outf;
};

LinearArgs linear_args(hpuStream_t stream, const TensorPtr &grad_y, const TensorPtr &x, const TensorPtr &w) {
  LinearArgs p{backward_pair(stream, grad_y, "grad_y", x, "x", w, "w"), 0, 0, 0};
  require_ndim(*p.b, "w", 2);
  if (p.a->ndim() < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s: it needs at least 1 dim", p.a->str().c_str());
  p.in = p.b->size(1), p.outf = p.b->size(0);
  check_inner(*p.a, "x", p.a->size(p.a->ndim() - 1), *p.b, "w", p.in);
  Dims out = p.a->shape();
  out[out.n - 1] = p.outf;
  require_shape(*p.g, "grad_y", out, "the forward's output shape");
  p.rows = leading(p.a->shape());
  return p;
}

// db = the column sums of dy, in w's type.
TensorPtr bias_grad(const LinearArgs &p) {
  TensorPtr gb = empty_like(*p.b, p.b->dtype(), Dims{p.outf});
  if (p.outf > 0)
    enqueue(*p.s, [=, dy = as(*p.s, p.g, p.dt), rows = p.rows, outf = p.outf] {
      kernels::reduce(kernels::Reduce::sum, dy->dtype(), dy->data(), 1, rows, outf, gb->data(), gb->dtype());
    });
  return gb;
}

kernels::Activation activation(hpuActivation_t a, const char *arg) {
  HPU_CHECK_ARG(a == HPU_ACTIVATION_NONE || a == HPU_ACTIVATION_RELU, "%s is %d: not an hpuActivation_t", arg,
                static_cast<int>(a));
  return a == HPU_ACTIVATION_RELU ? kernels::Activation::relu : kernels::Activation::none;
}

// A tensor of options that the result goes into or that has its role: on a's
// device, of the result's shape and type, contiguous.
TensorPtr like_result(const TensorPtr &t, const char *arg, const Tensor &a, const Dims &shape, hpuDataType_t dt) {
  same_device(a, "a", *t, arg);
  require_shape(*t, arg, shape, "the result's shape");
  if (t->dtype() != dt)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s: expected the result's type %s", arg, t->str().c_str(), dtype_name(dt));
  return t;
}

}  // namespace

TensorPtr ops::mm(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  return mm_or_bmm(false, stream, a, b);
}

OperandGrads ops::mm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a, const TensorPtr &b,
                              bool want_a, bool want_b) {
  return mm_or_bmm_backward(false, stream, grad_out, a, b, want_a, want_b);
}

TensorPtr ops::bmm(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  return mm_or_bmm(true, stream, a, b);
}

OperandGrads ops::bmm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a, const TensorPtr &b,
                               bool want_a, bool want_b) {
  return mm_or_bmm_backward(true, stream, grad_out, a, b, want_a, want_b);
}

TensorPtr ops::addmm(hpuStream_t stream, const TensorPtr &c, const TensorPtr &a, const TensorPtr &b, double beta,
                     double alpha) {
  Pair p = forward_pair("addmm", stream, a, "a", b, "b");
  same_device(*p.a, "a", *c, "bias");
  require_floating(*c, "bias");
  MmShape sh = mm_shape(*p.a, *p.b, false);
  Dims st;
  if (c->ndim() > 2 || !broadcast_strides(c->shape(), Dims{sh.m, sh.n}, &st))
    fail(HPU_ERROR_INVALID_ARGUMENT, "bias is %s: it does not broadcast to the product's shape %s",
         c->str().c_str(), Dims{sh.m, sh.n}.str().c_str());
  require_same_dtype(*p.a, "a", p.dt, *c, "bias", autocast::decide("addmm", {c->dtype()}).apply(c->dtype()));
  Operand A = operand(*p.s, p.a, p.dt), B = operand(*p.s, p.b, p.dt);
  TensorPtr C = as(*p.s, c, p.dt);
  return product(*p.s, p.dt, {sh.m, sh.n, sh.k}, 1, static_cast<float>(alpha), A, B, p.dt, Dims{sh.m, sh.n}, false,
                 bias_init(C, sh.m, sh.n), static_cast<float>(beta));
}

AddmmGrads ops::addmm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &c, const TensorPtr &a,
                               const TensorPtr &b, double beta, double alpha, bool want_bias, bool want_a,
                               bool want_b) {
  Grads p = backward_pair(stream, grad_out, "grad_out", a, "a", b, "b");
  same_device(*p.g, "grad_out", *c, "bias");
  require_floating(*c, "bias");
  MmShape sh = mm_shape(*p.a, *p.b, false);
  require_shape(*p.g, "grad_out", Dims{sh.m, sh.n}, "the forward's output shape");
  Dims st;
  if (c->ndim() > 2 || !broadcast_strides(c->shape(), Dims{sh.m, sh.n}, &st))
    fail(HPU_ERROR_INVALID_ARGUMENT, "bias is %s: it does not broadcast to %s", c->str().c_str(),
         Dims{sh.m, sh.n}.str().c_str());
  TensorPtr G = as(*p.s, p.g, p.dt);
  AddmmGrads r;
  if (want_bias) {
    TensorPtr gc = empty_like(*c, c->dtype(), c->shape());
    Dims to = pad_left(c->shape(), 2);
    if (gc->numel() > 0)
      enqueue(*p.s, [=] {
        int64_t shape[2] = {sh.m, sh.n};
        kernels::sum_to(G->dtype(), G->data(), 2, shape, to.data(), beta, gc->dtype(), gc->data());
      });
    r.bias = gc;
  }
  if (want_a)
    r.a = product(*p.s, p.dt, {sh.m, sh.k, sh.n, false, true}, 1, static_cast<float>(alpha), {G, sh.n, 0},
                  operand(*p.s, p.b, p.dt), p.a->dtype(), p.a->shape());
  if (want_b)
    r.b = product(*p.s, p.dt, {sh.k, sh.n, sh.m, true, false}, 1, static_cast<float>(alpha),
                  operand(*p.s, p.a, p.dt), {G, sh.n, 0}, p.b->dtype(), p.b->shape());
  return r;
}

TensorPtr ops::matmul(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b, const MatmulOptions &o) {
  Pair p = forward_pair("matmul", stream, a, "a", b, "b");
  const MatmulShape sh = matmul_shape(*p.a, *p.b);
  Stream &s = *p.s;
  HPU_CHECK_ARG(std::isfinite(o.alpha), "options->alpha is %g", o.alpha);
  HPU_CHECK_ARG(std::isfinite(o.beta), "options->beta is %g", o.beta);
  Post post;
  post.activation = activation(o.activation, "options->activation");
  post.backward = activation(o.activation_backward, "options->activation_backward");
  // The result's type: c's, options->dtype, or the run type.
  hpuDataType_t want = p.dt;
  if (o.dtype != HPU_BOOL) {
    HPU_CHECK_ARG(o.dtype > HPU_BOOL && o.dtype < HPU_NUM_DATA_TYPES, "options->dtype is %d: not an hpuDataType_t",
                  static_cast<int>(o.dtype));
    if (!is_floating(o.dtype))
      fail(HPU_ERROR_UNSUPPORTED, "options->dtype is %s: expected a floating type", dtype_name(o.dtype));
    want = o.dtype;
  }
  if (o.c) {
    post.into = o.c;
    same_device(*p.a, "a", *post.into, "options->c");
    require_shape(*post.into, "options->c", sh.out, "the result's shape");
    if (o.dtype != HPU_BOOL && post.into->dtype() != o.dtype)
      fail(HPU_ERROR_INVALID_ARGUMENT, "options->c is %s but options->dtype is %s", post.into->str().c_str(),
           dtype_name(o.dtype));
    want = post.into->dtype();
    if (!post.into->contiguous())
      fail(HPU_ERROR_INVALID_ARGUMENT, "options->c is %s (not contiguous): expected contiguous",
           post.into->str().c_str());
    if (direct_type(p.dt, want) != want)
      fail(HPU_ERROR_UNSUPPORTED, "options->c is %s: a product in %s writes %s%s", post.into->str().c_str(),
           dtype_name(p.dt), dtype_name(p.dt), p.dt == HPU_BFLOAT16 || p.dt == HPU_FLOAT16 ? " or f32" : "");
  } else {
    HPU_CHECK_ARG(o.beta == 0, "options->beta is %g but options->c is NULL: there is no C to accumulate into", o.beta);
  }
  if (post.backward != kernels::Activation::none) {
    HPU_CHECK_ARG(o.activation_input != nullptr, "options->activation_input is NULL: options->activation_backward needs it");
    TensorPtr x = like_result(o.activation_input, "options->activation_input", *p.a, sh.out, want);
    post.backward_input = as(s, x, want);
  }
  TensorPtr pre = o.pre_activation ? like_result(o.pre_activation, "options->pre_activation", *p.a, sh.out, want)
                                   : nullptr;
  if (pre && !pre->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "options->pre_activation is %s (not contiguous): expected contiguous",
         pre->str().c_str());
  TensorPtr bias;
  if (o.bias) {
    bias = o.bias;
    same_device(*p.a, "a", *bias, "options->bias");
    require_floating(*bias, "options->bias");
    require_shape(*bias, "options->bias", Dims{sh.n}, "the result's last dim");
    HPU_CHECK_ARG(o.beta == 0, "options->beta is %g: options->bias needs beta 0", o.beta);
  }
  if (o.adamw) {
    HPU_CHECK_ARG(o.c != nullptr, "options->c is NULL: options->adamw steps the weights in c");
    HPU_CHECK_ARG(!o.bias && !o.pre_activation && post.activation == kernels::Activation::none &&
                      post.backward == kernels::Activation::none && o.beta == 0,
                  "options->adamw takes the product as the gradient: bias, pre_activation, the activations and beta "
                  "must not be set");
    check_param(o.c, "options->c");
    if (want != HPU_FLOAT32 || direct_type(p.dt, HPU_FLOAT32) != HPU_FLOAT32)
      fail(HPU_ERROR_UNSUPPORTED, "options->adamw: the product runs in %s; the gradient of f32 weights needs bf16, "
           "f16 or f32", dtype_name(p.dt));
    post.adamw = adamw_args(o.c, "options->c", {o.adamw_exp_avg, "options->adamw_exp_avg"},
                            {o.adamw_exp_avg_sq, "options->adamw_exp_avg_sq"}, o.adamw_step, *o.adamw,
                            "options->adamw");
  }
  // Operands that overlap what the product writes are read from copies.
  const TensorPtr written[] = {post.into, pre, post.adamw ? post.adamw->exp_avg : nullptr,
                               post.adamw ? post.adamw->exp_avg_sq : nullptr, post.adamw ? post.adamw->copy : nullptr};
  TensorPtr A = p.a, B = p.b;
  for (const TensorPtr &w : written)
    if (w) {
      if (overlap(*A, *w)) A = copy_as(s, A, p.dt);
      if (overlap(*B, *w)) B = copy_as(s, B, p.dt);
      if (post.backward_input && overlap(*post.backward_input, *w))
        post.backward_input = copy_as(s, post.backward_input, want);
      if (bias && overlap(*bias, *w)) bias = copy_as(s, bias, bias->dtype());
    }
  // Before the activation when pre_activation wants r: then the activations
  // run as passes after it.
  Post fused = post;
  if (pre) fused.activation = fused.backward = kernels::Activation::none;
  const hpuDataType_t cdt = direct_type(p.dt, want);
  const int64_t rows = sh.b_batch.n == 0 ? sh.nbatch * sh.m : sh.m;
  std::function<void(void *, hpuDataType_t)> init;
  float beta = static_cast<float>(o.beta);
  if (bias) {  // in the type the product runs in, then C's
    fused.bias = as(s, as(s, bias, p.dt), cdt);
    if (sh.k == 0) init = bias_init(fused.bias, sh.nbatch * sh.m, sh.n), fused.bias = nullptr, beta = 1.0f;
  }
  const Operand Bo = matmul_operand(s, B, p.dt, sh.b_batch, sh, sh.k, sh.n);
  TensorPtr y;
  if (sh.b_batch.n == 0)  // fold a's batch into its rows: one product
    y = product(s, p.dt, {rows, sh.n, sh.k}, 1, static_cast<float>(o.alpha), rows_operand(s, A, p.dt), Bo, want,
                sh.out, false, init, beta, fused);
  else
    y = product(s, p.dt, {sh.m, sh.n, sh.k}, sh.nbatch, static_cast<float>(o.alpha),
                matmul_operand(s, A, p.dt, sh.a_batch, sh, sh.m, sh.k), Bo, want, sh.out, false, init, beta, fused);
  if (pre) {
    if (y->numel() > 0) enqueue_copy(s, pre, y);
    activation_passes(s, y, post);
  }
  return y;
}

OperandGrads ops::matmul_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a,
                                  const TensorPtr &b, bool want_a, bool want_b) {
  Grads p = backward_pair(stream, grad_out, "grad_out", a, "a", b, "b");
  MatmulShape sh = matmul_shape(*p.a, *p.b);
  require_shape(*p.g, "grad_out", sh.out, "the forward's output shape");
  OperandGrads r;
  if (sh.b_batch.n == 0) {  // rows folded: G [R, n], A [R, k]
    int64_t rows = sh.nbatch * sh.m;
    Operand G{as(*p.s, p.g, p.dt), sh.n, 0}, B = matmul_operand(*p.s, p.b, p.dt, sh.b_batch, sh, sh.k, sh.n);
    if (want_a) r.a = product(*p.s, p.dt, {rows, sh.k, sh.n, false, true}, 1, 1.0f, G, B, p.a->dtype(), p.a->shape());
    if (want_b)
      r.b = product(*p.s, p.dt, {sh.k, sh.n, rows, true, false}, 1, 1.0f, rows_operand(*p.s, p.a, p.dt), G,
                    p.b->dtype(), p.b->shape());
  } else {
    Operand G{as(*p.s, p.g, p.dt), sh.n, sh.m * sh.n};
    if (want_a)  // G_i B_i^T
      r.a = matmul_grad(*p.s, p.dt, {sh.m, sh.k, sh.n, false, true}, sh, sh.a_batch, G,
                        matmul_operand(*p.s, p.b, p.dt, sh.b_batch, sh, sh.k, sh.n), p.a);
    if (want_b)  // A_i^T G_i
      r.b = matmul_grad(*p.s, p.dt, {sh.k, sh.n, sh.m, true, false}, sh, sh.b_batch,
                        matmul_operand(*p.s, p.a, p.dt, sh.a_batch, sh, sh.m, sh.k), G, p.b);
  }
  return r;
}

TensorPtr ops::linear(hpuStream_t stream, const TensorPtr &xb, const TensorPtr &wb, const TensorPtr &bb) {
  same_device(*xb, "x", *wb, "w");
  require_floating(*xb, "x");
  require_floating(*wb, "w");
  autocast::Decision d = autocast::decide("linear", {xb->dtype(), wb->dtype(), bb ? bb->dtype() : wb->dtype()});
  hpuDataType_t dt = d.apply(xb->dtype());
  require_same_dtype(*xb, "x", dt, *wb, "w", d.apply(wb->dtype(), 1));
  require_ndim(*wb, "w", 2);
  if (xb->ndim() < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s: it needs at least 1 dim", xb->str().c_str());
  int64_t in = wb->size(1), outf = wb->size(0);
  check_inner(*xb, "x", xb->size(xb->ndim() - 1), *wb, "w", in);
  if (bb) {
    same_device(*xb, "x", *bb, "bias");
    require_floating(*bb, "bias");
    require_shape(*bb, "bias", Dims{outf}, "w's rows");
    require_same_dtype(*xb, "x", dt, *bb, "bias", d.apply(bb->dtype(), 2));
  }
  auto s = stream_for(stream, *xb);
  Dims out = xb->shape();
  out[out.n - 1] = outf;
  int64_t rows = leading(xb->shape());
  Operand X = rows_operand(*s, xb, dt), W = operand(*s, wb, dt);
  // The bias (contiguous, of C's type dt) added as the product is stored; with
  // in == 0 there is no product to add it to, and C is filled with it.
  Post post;
  post.bias = bb ? as(*s, bb, dt) : nullptr;
  std::function<void(void *, hpuDataType_t)> init;
  if (post.bias && in == 0) init = bias_init(post.bias, rows, outf), post.bias = nullptr;
  return product(*s, dt, {rows, outf, in, false, true}, 1, 1.0f, X, W, dt, out, false, init, init ? 1.0f : 0.0f,
                 post);
}

LinearGrads ops::linear_backward(hpuStream_t stream, const TensorPtr &grad_y, const TensorPtr &x, const TensorPtr &w,
                                 bool want_x, bool want_w, bool want_bias) {
  const LinearArgs p = linear_args(stream, grad_y, x, w);
  const int64_t rows = p.rows, in = p.in, outf = p.outf;
  Operand G = rows_operand(*p.s, p.g, p.dt);
  LinearGrads r;
  if (want_x)  // dx = dy w
    r.x = product(*p.s, p.dt, {rows, in, outf}, 1, 1.0f, G, operand(*p.s, p.b, p.dt), p.a->dtype(), p.a->shape());
  if (want_w)  // dw = dy^T x
    r.w = product(*p.s, p.dt, {outf, in, rows, true, false}, 1, 1.0f, G, rows_operand(*p.s, p.a, p.dt),
                  p.b->dtype(), p.b->shape());
  if (want_bias) r.bias = bias_grad(p);
  return r;
}
