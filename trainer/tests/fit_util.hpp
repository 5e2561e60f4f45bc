// A small synthetic task for the loop tests: 4 Gaussian blobs in 16 dimensions.
#pragma once

#include <hpu/trainer.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace trainer_test {

inline hpu::TensorDataset blobs(size_t n, uint64_t seed) {
  hpu::Rng rng(seed);
  std::vector<float> x(n * 16);
  std::vector<int32_t> y(n);
  for (size_t i = 0; i < n; ++i) {
    y[i] = int32_t(rng.below(4));
    for (size_t k = 0; k < 16; ++k) x[i * 16 + k] = rng.normal() * 0.7f + (k % 4 == size_t(y[i]) ? 1.5f : 0.0f);
  }
  return hpu::TensorDataset(std::move(x), std::move(y), {16});
}

inline hpu::InMemoryData blob_data(int batch = 32) {
  return hpu::InMemoryData(blobs(512, 1), blobs(128, 2), blobs(128, 3), 4, batch);
}

inline hpu::Sequential mlp(bool dropout = false) {
  hpu::Sequential s;
  s.add(hpu::Linear(16, 32));
  s.add(hpu::GELU());
  if (dropout) s.add(hpu::Dropout(0.2));
  s.add(hpu::LayerNorm(32));
  s.add(hpu::Linear(32, 4));
  return s;
}

inline hpu::OptimizerSpec adamw(double lr = 1e-2) {
  hpu::OptimizerSpec o;
  o.name = "adamw";
  o.lr = lr;
  return o;
}

// The resume tests' optimizer and schedule: SGD with momentum (state to
// restore) under a cosine schedule of fixed length, so that a shorter run
// follows the same schedule.
inline hpu::OptimizerSpec sgd_momentum() {
  hpu::OptimizerSpec o;
  o.name = "sgd";
  o.lr = 0.05;
  o.momentum = 0.9;
  return o;
}

inline hpu::SchedulerSpec fixed_cosine() {
  hpu::SchedulerSpec c;
  c.name = "cosine";
  c.warmup_steps = 5;
  c.total_steps = 64;
  return c;
}

// A one-device, one-epoch run that writes and prints nothing (no logger,
// checkpoints, progress bar or model summary), in `root`.
inline hpu::TrainerOptions silent_run(const std::string &root, uint64_t seed = 1) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = seed;
  o.max_epochs = 1;
  o.default_root_dir = root;
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.enable_model_summary = false;
  o.logger = false;
  return o;
}

// The weights of a model, as bytes, after its device work completed.
inline std::vector<std::vector<float>> weights(hpu::LightningModule &m) {
  std::vector<std::vector<float>> out;
  for (hpu::Parameter *p : m.parameters()) out.push_back(p->value.to_vector<float>());
  return out;
}

// Two models' weights (from weights()) are equal bit for bit.
inline void expect_bit_identical(const std::vector<std::vector<float>> &a, const std::vector<std::vector<float>> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "parameter " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << "parameter " << i << " differs";
  }
}

}  // namespace trainer_test
