#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/trainer.hpp>

namespace hpu {

Metrics DeviceStatsMonitor::device_stats(Trainer &t, const std::string &hook) {
  Metrics m;
  const auto &devs = t.devices();
  for (size_t i = 0; i < devs.size(); ++i) {
    const hpuMemStats_t s = devs[i].mem_stats();
    const std::string p = "DeviceStatsMonitor." + hook + "/" + (i == 0 ? "" : "hpu" + std::to_string(i) + "/");
    m[p + "Limit"] = double(s.limit);
    m[p + "InUse"] = double(s.in_use);
    m[p + "MaxInUse"] = double(s.max_in_use);
    m[p + "NumAllocs"] = double(s.num_allocs);
    m[p + "NumFrees"] = double(s.num_frees);
    m[p + "ActiveAllocs"] = double(s.active_allocs);
    m[p + "MaxAllocSize"] = double(s.max_alloc_size);
    m[p + "TotalSystemAllocs"] = double(s.total_system_allocs);
    m[p + "TotalSystemFrees"] = double(s.total_system_frees);
    m[p + "TotalActiveAllocs"] = double(s.total_active_allocs);
  }
  return m;
}

// The batch's optimizer step advances global_step between the two training
// hooks: its end is logged under the step and the decision its start took.
void DeviceStatsMonitor::on_train_batch_start(Trainer &t, int64_t) {
  batch_step_ = t.global_step();
  batch_logs_ = t.should_update_logs();
  if (batch_logs_) t.log_metrics(device_stats(t, "on_train_batch_start"), batch_step_);
}

void DeviceStatsMonitor::on_train_batch_end(Trainer &t, const Metrics &, int64_t) {
  if (batch_logs_ || t.state().should_stop) t.log_metrics(device_stats(t, "on_train_batch_end"), batch_step_);
}

void DeviceStatsMonitor::log(Trainer &t, const char *hook) {
  if (!t.should_update_logs()) return;
  t.log_metrics(device_stats(t, hook), t.global_step());
}

}  // namespace hpu
