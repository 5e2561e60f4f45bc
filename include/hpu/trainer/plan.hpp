// The step planner: what a training step fuses, decided in one place from the
// whole model and what the callbacks need, instead of by each layer, the
// parameters or the loop.
//
//  - Activations (plan_layers, which Sequential runs): a layer whose forward
//    ends in a product (Linear) applies the activation layer after it (ReLU)
//    as its product's epilogue, and when another product follows, that one's
//    input gradient applies the activation's backward (hpuMatmulEx(3)). The
//    results are bitwise those of the layers run one by one.
//  - The optimizer step in the backward (StepPlan): when nothing but the
//    optimizer reads a step's gradients (one replica, no gradient
//    accumulation, no clipping, no hook that needs them), the optimizer
//    offers each parameter's update to the layer that computes its gradient;
//    a layer whose forward used the parameter once applies it as it computes
//    the gradient, which is never stored. The weights are bitwise the same.
//  - Low-precision weights (StepPlan::low): the copy a layer reads under
//    autocast, kept while the weights are unchanged; an optimizer whose step
//    writes it beside the weights (AdamW's param_copy) keeps it current.
//
// A user's layers, callbacks and optimizers take part by opting in: a layer
// through Module::activation, Module::takes_fusion and Module::forward_fused;
// a callback or the LightningModule by declaring what its hooks read
// (Callback::needs, LightningModule::needs); an optimizer
// through Optimizer::offer_step_in_backward.
#pragma once

#include <hpu/hpu.hpp>

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace hpu {

class Module;
struct Parameter;

// How a layer's forward joins the layers around it.
struct Fusion {
  // Applied to the product as it is stored; the activation layer after this
  // one is skipped.
  hpuActivation_t activation = HPU_ACTIVATION_NONE;
  // Whether this layer records that activation's backward (false: the next
  // layer's input gradient applies it).
  bool record_activation_backward = true;
  // This layer's input is that activation's output: its input gradient
  // applies the activation's backward.
  hpuActivation_t input_activation = HPU_ACTIVATION_NONE;
  // The layer before applies this one (an activation).
  bool skip = false;
};

// The fusions of layers that run one after another, one per layer.
std::vector<Fusion> plan_layers(const std::vector<Module *> &layers);

// What of a fit decides whether a step's gradients are read by anything but
// the optimizer.
struct StepReaders {
  bool gradients_shared = false;    // averaged over replicas (hpu_ddp)
  int64_t accumulate_grad_batches = 1;
  bool clipped = false;             // gradient_clip_val > 0
  bool callbacks_read_gradients = false;  // a callback's or the module's hooks
};

// An AdamW update of one parameter that the layer computing its gradient
// applies in the backward (hpuMatmulOptions_t's adamw fields).
struct UpdateInBackward {
  Tensor exp_avg, exp_avg_sq;
  int64_t step = 0;
  hpuAdamwOptions_t options = HPU_ADAMW_OPTIONS_INIT;
};

// One replica's plan: the trainer's decisions, and the state that layers and
// the optimizer share through it (Context::plan, Optimizer::set_plan).
class StepPlan {
 public:
  // At the start of a fit.
  void plan_fit(const StepReaders &readers);
  // Whether the optimizer may offer its updates to the backward.
  bool optimizer_in_backward() const { return in_backward_; }

  // The optimizer's side: offers p's next update, then asks whether a layer
  // applied it. step_done() ends the step.
  void offer(const Parameter &p, UpdateInBackward u);
  bool applied(const Parameter &p) const;
  void step_done();

  // A layer's side: a forward read p; in the backward, the offered update of
  // p when that forward was its only one this step (nullptr: none), and that
  // the layer applied it.
  void used(const Parameter &p);
  const UpdateInBackward *update_in_backward(const Parameter &p) const;
  void apply(const Parameter &p);

  // p's value converted to dt, converted on first use and kept while the
  // values are unchanged. Whatever writes values calls values_changed() (the
  // trainer: at the start of fit, validate and test, before each optimizer
  // step and after loading a checkpoint); an optimizer whose step also writes
  // the copy (copy_of) then calls copy_written().
  const Tensor &low(const Parameter &p, hpuDataType_t dt, hpuStream_t stream);
  void values_changed();
  const Tensor *copy_of(const Parameter &p) const;
  void copy_written(const Parameter &p);

 private:
  struct Entry {
    Tensor low;
    bool low_current = false;
    std::optional<UpdateInBackward> offer;
    int forwards = 0;
    bool applied = false;
  };
  const Entry *find(const Parameter &p) const;
  bool in_backward_ = false;
  std::unordered_map<const Parameter *, Entry> entries_;
};

}  // namespace hpu
