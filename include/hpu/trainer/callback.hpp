// The callback interface: Lightning's hooks, called by the trainer in
// Lightning's order. Every hook gets the trainer; its state says where the loop
// is (epoch, step, metrics). A callback with state saves it in checkpoints.
#pragma once

#include <hpu/hpu.hpp>
#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/logger.hpp>

#include <cstdint>
#include <exception>
#include <string>

namespace hpu {

class Trainer;

// What a callback reads of a training step, for the step planner (plan.hpp):
// work whose results no callback reads may be fused away. A callback that
// declares nothing reads everything.
// A LightningModule declares the same for its own hooks.
struct CallbackNeeds {
  // The parameters' gradients, in on_after_backward or on_before_optimizer_step.
  bool gradients = true;
  // A callback that reads none of the step's intermediate results.
  static CallbackNeeds none() {
    CallbackNeeds n;
    n.gradients = false;
    return n;
  }
};

enum class Stage { fit, validate, test, predict };
const char *stage_name(Stage s);

class Callback {
 public:
  virtual ~Callback() = default;
  // Names this callback's state in a checkpoint; by default its class name.
  virtual std::string state_key() const = 0;
  virtual std::string state_dict() const { return ""; }  // JSON text, "" = none
  virtual void load_state_dict(const std::string &json) { (void)json; }

  virtual void setup(Trainer &, Stage) {}
  virtual void teardown(Trainer &, Stage) {}
  virtual void on_fit_start(Trainer &) {}
  virtual void on_fit_end(Trainer &) {}
  virtual void on_train_start(Trainer &) {}
  virtual void on_train_end(Trainer &) {}
  virtual void on_train_epoch_start(Trainer &) {}
  virtual void on_train_epoch_end(Trainer &) {}
  virtual void on_train_batch_start(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  // `outputs` holds what the training step logged (at least "loss").
  virtual void on_train_batch_end(Trainer &, const Metrics &outputs, int64_t batch_idx) {
    (void)outputs, (void)batch_idx;
  }
  // Around each training batch's backward, on the thread of this process's
  // first replica: `loss` is its loss (what backward starts from); after it,
  // the parameters' gradients hold this batch's contribution (with
  // accumulate_grad_batches, the sum so far; under hpu_ddp, averaged over
  // the ranks on a batch that ends an accumulation). The parameters:
  // state().optimizers[0]->params() (under hpu_ddp with a sharded optimizer,
  // its slices of them).
  virtual void on_before_backward(Trainer &, const Tensor &loss) { (void)loss; }
  virtual void on_after_backward(Trainer &) {}
  virtual void on_before_optimizer_step(Trainer &) {}
  // What this callback reads (everything unless it says less; the built-in
  // callbacks read no gradients). With one device, AdamW, no accumulation
  // and no clipping, Linear weights take their step inside backward and their
  // gradients are never stored, but only while no callback (and not the
  // LightningModule) needs gradients: a callback that reads them in
  // on_after_backward or on_before_optimizer_step keeps the default.
  virtual CallbackNeeds needs() const { return {}; }
  // Lightning's checkpoint hooks, for state beyond state_dict(): on save,
  // after the trainer filled `ckpt` (its weights, optimizer and callbacks'
  // states), a callback may add tensors and meta keys of its own
  // (Checkpoint::set_meta); on load, before the trainer restores anything
  // from it (fit's ckpt_path, restore_checkpoint), it may read them.
  virtual void on_save_checkpoint(const Trainer &, Checkpoint &ckpt) { (void)ckpt; }
  virtual void on_load_checkpoint(Trainer &, const Checkpoint &ckpt) { (void)ckpt; }
  // When fit, validate or test throws: called with the error before it
  // propagates (an error a hook throws itself is dropped, the original one
  // propagates); teardown is not called then.
  virtual void on_exception(Trainer &, const std::exception &error) { (void)error; }
  // The validation batches fit runs before training (num_sanity_val_steps),
  // between on_fit_start and on_train_start; state().sanity_checking is true
  // meanwhile and the validation hooks run as for any validation, but the
  // metrics are not logged.
  virtual void on_sanity_check_start(Trainer &) {}
  virtual void on_sanity_check_end(Trainer &) {}
  virtual void on_validation_start(Trainer &) {}
  virtual void on_validation_end(Trainer &) {}
  virtual void on_validation_epoch_start(Trainer &) {}
  virtual void on_validation_epoch_end(Trainer &) {}
  virtual void on_validation_batch_start(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  virtual void on_validation_batch_end(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  virtual void on_test_start(Trainer &) {}
  virtual void on_test_end(Trainer &) {}
  virtual void on_test_epoch_start(Trainer &) {}
  virtual void on_test_epoch_end(Trainer &) {}
  virtual void on_test_batch_start(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  virtual void on_test_batch_end(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  virtual void on_predict_start(Trainer &) {}
  virtual void on_predict_end(Trainer &) {}
  virtual void on_predict_batch_start(Trainer &, int64_t batch_idx) { (void)batch_idx; }
  virtual void on_predict_batch_end(Trainer &, int64_t batch_idx) { (void)batch_idx; }
};

}  // namespace hpu
