// The step planner (plan.hpp): every fusion decision of a training step.
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/plan.hpp>

namespace hpu {

std::vector<Fusion> plan_layers(const std::vector<Module *> &layers) {
  // A product followed by an activation it can apply takes it; when another
  // product follows that, the activation's backward moves into that one's
  // input gradient.
  std::vector<Fusion> plan(layers.size());
  auto product = [&](size_t i) { return i < layers.size() && layers[i]->takes_fusion(); };
  for (size_t i = 0; i < layers.size(); ++i) {
    if (plan[i].skip || !product(i) || i + 1 >= layers.size()) continue;
    const hpuActivation_t a = layers[i + 1]->activation();
    if (a == HPU_ACTIVATION_NONE) continue;
    plan[i].activation = a;
    plan[i + 1].skip = true;
    if (product(i + 2)) {
      plan[i].record_activation_backward = false;
      plan[i + 2].input_activation = a;
    }
  }
  return plan;
}

void StepPlan::plan_fit(const StepReaders &r) {
  in_backward_ = !r.gradients_shared && r.accumulate_grad_batches == 1 && !r.clipped && !r.callbacks_read_gradients;
}

const StepPlan::Entry *StepPlan::find(const Parameter &p) const {
  auto it = entries_.find(&p);
  return it == entries_.end() ? nullptr : &it->second;
}

void StepPlan::offer(const Parameter &p, UpdateInBackward u) {
  Entry &e = entries_[&p];
  e.offer = std::move(u);
  e.forwards = 0;
  e.applied = false;
}

bool StepPlan::applied(const Parameter &p) const {
  const Entry *e = find(p);
  return e && e->applied;
}

void StepPlan::step_done() {
  for (auto &[p, e] : entries_) {
    e.offer.reset();
    e.forwards = 0;
    e.applied = false;
  }
}

void StepPlan::used(const Parameter &p) {
  auto it = entries_.find(&p);
  if (it != entries_.end() && it->second.offer) ++it->second.forwards;
}

const UpdateInBackward *StepPlan::update_in_backward(const Parameter &p) const {
  const Entry *e = find(p);
  return e && e->offer && e->forwards == 1 ? &*e->offer : nullptr;
}

void StepPlan::apply(const Parameter &p) {
  Entry &e = entries_[&p];
  e.offer.reset();
  e.applied = true;
}

const Tensor &StepPlan::low(const Parameter &p, hpuDataType_t dt, hpuStream_t stream) {
  Entry &e = entries_[&p];
  if (!e.low_current || e.low.dtype() != dt) {
    hpuTensor_t t = nullptr;
    check(hpuCast(stream, p.value.get(), dt, &t));
    e.low = Tensor(t);
    e.low_current = true;
  }
  return e.low;
}

void StepPlan::values_changed() {
  for (auto &[p, e] : entries_) e.low_current = false;
}

const Tensor *StepPlan::copy_of(const Parameter &p) const {
  const Entry *e = find(p);
  return e && e->low ? &e->low : nullptr;
}

void StepPlan::copy_written(const Parameter &p) {
  auto it = entries_.find(&p);
  if (it != entries_.end() && it->second.low) it->second.low_current = true;
}

}  // namespace hpu
