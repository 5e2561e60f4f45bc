// Layers with their backward beside their forward, and the tape that replays
// the backward passes of the layers a step ran, in reverse (no general autograd).
#pragma once

#include <hpu/hpu.hpp>
#include <hpu/trainer/optimizer.hpp>
#include <hpu/trainer/plan.hpp>
#include <hpu/trainer/rng.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hpu {

// A trainable tensor: f32 master weights and the f32 gradient accumulated into
// them by the backward passes.
struct Parameter {
  std::string name;
  Tensor value, grad;
  // Called with false after each addition into grad, with true at the start of
  // a step (hpu_ddp's buckets); empty otherwise.
  std::function<void(bool reset)> on_grad;

  // grad += g, queued on `stream` (g may be bf16; the sum stays f32). The
  // first addition after zero_grad() writes g over grad instead.
  void accumulate(const Tensor &g, hpuStream_t stream);
  // accumulate() for a gradient nothing else refers to (an op's output, the
  // layers' weight gradients): the first addition after zero_grad() makes g
  // the grad tensor instead of copying it, when g is f32 of grad's shape and
  // grad may move (no on_grad: hpu_ddp's buckets stay in place).
  void accumulate_owned(Tensor g, hpuStream_t stream);
  // Sets grad to zero: lazily, as the next accumulate() overwrites it.
  void zero_grad() { zero_pending_ = true; }
  // Writes the zeros zero_grad() deferred, if no gradient came since: call it
  // before anything reads grad (an optimizer step, an allreduce).
  void materialize_grad(hpuStream_t stream);

 private:
  bool zero_pending_ = false;
};

// The backward steps of one forward pass, replayed last first.
class Tape {
 public:
  using Step = std::function<Tensor(const Tensor &grad_out)>;
  // Records a step: from now on, the inputs of later layers need gradients.
  void push(Step s) {
    steps_.push_back(std::move(s));
    grads_flow_ = true;
  }
  // Whether the gradient of a layer's input is needed: a step recorded
  // before it leads to parameters. Layers without parameters record nothing
  // while it is false, and the first layer with parameters (Linear on the
  // data) skips its input gradient, as autograd does for inputs that do not
  // require grad.
  bool needs_input_grad() const { return grads_flow_; }
  // Makes needs_input_grad() true from the start: a tape for the layers inside
  // a block (Residual) whose own input needs its gradient.
  void require_input_grad() { grads_flow_ = true; }
  // Runs the steps in reverse from `grad`; returns the gradient of the input
  // (empty when nothing needed it). Clears the tape.
  Tensor backward(Tensor grad);
  void clear() {
    steps_.clear();
    grads_flow_ = false;
  }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<Step> steps_;
  bool grads_flow_ = false;
};

// What a forward pass runs with: the stream, train/eval mode, the tape
// (recording only while training) and the trainer's step plan (null outside
// the trainer: nothing is kept or fused across layers' steps).
struct Context {
  hpuStream_t stream = nullptr;
  bool training = true;
  Tape tape;
  StepPlan *plan = nullptr;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual std::string name() const = 0;
  virtual Tensor forward(Context &ctx, const Tensor &x) = 0;
  // Creates the parameters on `dev`, initialised from `rng` as PyTorch does.
  virtual void init(hpuDevice_t dev, Rng &rng) { (void)dev, (void)rng; }
  virtual void parameters(std::vector<Parameter *> &out, const std::string &prefix) { (void)out, (void)prefix; }
  virtual std::unique_ptr<Module> clone() const = 0;  // same configuration, no parameters
  // The layers inside this one (Sequential's), for model_summary; none by default.
  virtual std::vector<Module *> children() { return {}; }

  // Taking part in the step plan (plan.hpp), opt-in. An elementwise
  // activation names its hpuActivation_t, so that a product before it may
  // apply it as it is stored.
  virtual hpuActivation_t activation() const { return HPU_ACTIVATION_NONE; }
  // A layer whose forward ends in a product that can apply a Fusion's
  // epilogues says so; Sequential then runs forward_fused with the plan's
  // Fusion for it in place of forward.
  virtual bool takes_fusion() const { return false; }
  virtual Tensor forward_fused(Context &ctx, const Tensor &x, const Fusion &f) {
    (void)f;
    return forward(ctx, x);
  }
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string name() const override { return "Linear"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  // x w^T + b through hpuMatmulEx, with the Fusion's activation applied as
  // it is stored and its input activation's backward on the input gradient;
  // the weight takes the plan's update in the backward when offered.
  bool takes_fusion() const override { return true; }
  Tensor forward_fused(Context &ctx, const Tensor &x, const Fusion &f) override;
  void init(hpuDevice_t dev, Rng &rng) override;
  void parameters(std::vector<Parameter *> &out, const std::string &prefix) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<Linear>(in_, out_, has_bias_); }

 private:
  int64_t in_, out_;
  bool has_bias_;
  Parameter w_, b_;
};

class ReLU : public Module {
 public:
  std::string name() const override { return "ReLU"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<ReLU>(); }
  hpuActivation_t activation() const override { return HPU_ACTIVATION_RELU; }
};

class GELU : public Module {
 public:
  std::string name() const override { return "GELU"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<GELU>(); }
};

class Tanh : public Module {
 public:
  std::string name() const override { return "Tanh"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<Tanh>(); }
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  std::string name() const override { return "Dropout"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<Dropout>(p_); }

 private:
  double p_;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5);
  std::string name() const override { return "LayerNorm"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  void init(hpuDevice_t dev, Rng &rng) override;
  void parameters(std::vector<Parameter *> &out, const std::string &prefix) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<LayerNorm>(d_, eps_); }

 private:
  int64_t d_;
  double eps_;
  Parameter w_, b_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  std::string name() const override { return "Embedding"; }
  Tensor forward(Context &ctx, const Tensor &indices) override;
  void init(hpuDevice_t dev, Rng &rng) override;
  void parameters(std::vector<Parameter *> &out, const std::string &prefix) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<Embedding>(v_, d_); }

 private:
  int64_t v_, d_;
  Parameter w_;
};

// [N, d1, d2, ...] -> [N, d1 x d2 x ...].
class Flatten : public Module {
 public:
  std::string name() const override { return "Flatten"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  std::unique_ptr<Module> clone() const override { return std::make_unique<Flatten>(); }
};

class Sequential : public Module {
 public:
  Sequential() = default;
  void add(std::unique_ptr<Module> m) { layers_.push_back(std::move(m)); }
  template <class M>
  Sequential &add(M m) {
    layers_.push_back(std::make_unique<M>(std::move(m)));
    return *this;
  }
  std::string name() const override { return "Sequential"; }
  // The layers in turn, fused as plan_layers plans them.
  Tensor forward(Context &ctx, const Tensor &x) override;
  void init(hpuDevice_t dev, Rng &rng) override;
  void parameters(std::vector<Parameter *> &out, const std::string &prefix) override;
  std::unique_ptr<Module> clone() const override;
  std::vector<Module *> children() override;
  size_t size() const { return layers_.size(); }

 private:
  std::vector<std::unique_ptr<Module>> layers_;
};

// x + body(x), a residual (skip) connection: the body's layers run on x and
// their output, which must have x's shape, is added to it (an
// HPU_ERROR_INVALID_ARGUMENT naming both shapes otherwise). The backward sends
// the output's gradient both through the body and straight to x, and sums the
// two. The body's parameters are named "body.<i>.": "net.2.body.0.weight".
class Residual : public Module {
 public:
  Residual() = default;
  explicit Residual(Sequential body) : body_(std::move(body)) {}
  std::string name() const override { return "Residual"; }
  Tensor forward(Context &ctx, const Tensor &x) override;
  void init(hpuDevice_t dev, Rng &rng) override { body_.init(dev, rng); }
  void parameters(std::vector<Parameter *> &out, const std::string &prefix) override {
    body_.parameters(out, prefix + "body.");
  }
  std::unique_ptr<Module> clone() const override;
  std::vector<Module *> children() override { return body_.children(); }
  Sequential &body() { return body_; }

 private:
  Sequential body_;
};

// Mean cross-entropy of logits [N, C] against labels [N] (i32); records its
// backward. The loss is a 0-dim f32 tensor.
Tensor cross_entropy(Context &ctx, const Tensor &logits, const Tensor &labels);

// torch.optim.SGD with momentum over f32 master weights.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter *> params, double lr, double momentum = 0.0, double weight_decay = 0.0,
      bool nesterov = false);
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0.0, double weight_decay = 0.0,
      bool nesterov = false);
  std::string name() const override { return "SGD"; }
  std::optional<double> momentum() const override { return momentum_; }
  void step(hpuStream_t stream) override;
  void state(std::vector<std::pair<std::string, Tensor>> &out) override;
  std::unique_ptr<Optimizer> with_params(std::vector<Parameter *> params) const override;

 private:
  double momentum_, weight_decay_;
  bool nesterov_;
  std::vector<Tensor> buf_;
};

// torch.optim.AdamW (decoupled weight decay) over f32 master weights.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Parameter *> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2);
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2);
  std::string name() const override { return "AdamW"; }
  std::optional<double> momentum() const override { return beta1_; }
  void step(hpuStream_t stream) override;
  bool offer_step_in_backward(double lr) override;
  void state(std::vector<std::pair<std::string, Tensor>> &out) override;
  std::unique_ptr<Optimizer> with_params(std::vector<Parameter *> params) const override;

 private:
  hpuAdamwOptions_t options(size_t i, double lr) const;  // params()[i]'s at the optimizer's lr
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<Tensor> m_, v_;
};

}  // namespace hpu
