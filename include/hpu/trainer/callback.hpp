// The callback interface: Lightning's hooks, called by the trainer in
// Lightning's order. Every hook gets the trainer; its state says where the loop
// is (epoch, step, metrics). A callback with state saves it in checkpoints.
#pragma once

#include <hpu/trainer/logger.hpp>

#include <cstdint>
#include <string>

namespace hpu {

class Trainer;

// What a callback reads of a training step, for the step planner (plan.hpp):
// work whose results no callback reads may be fused away. A callback that
// declares nothing reads everything.
struct CallbackNeeds {
  // The parameters' gradients, in on_before_optimizer_step.
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
  virtual void on_before_optimizer_step(Trainer &) {}
  // What this callback reads (everything unless it says less; the built-in
  // callbacks read no gradients). With one device, AdamW, no accumulation
  // and no clipping, Linear weights take their step inside backward and their
  // gradients are never stored, but only while no callback needs gradients.
  virtual CallbackNeeds needs() const { return {}; }
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
