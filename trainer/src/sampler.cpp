#include <hpu/trainer/sampler.hpp>
#include <hpu/trainer/rng.hpp>

#include "error.hpp"

namespace hpu {

DistributedSampler::DistributedSampler(size_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(dataset_size), replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  if (num_replicas < 1) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "num_replicas is %d; expected >= 1", num_replicas);
  if (rank < 0 || rank >= num_replicas)
    detail::fail(HPU_ERROR_INVALID_ARGUMENT, "rank is %d; expected 0 to %d", rank, num_replicas - 1);
  const size_t r = size_t(num_replicas);
  per_rank_ = drop_last ? n_ / r : (n_ + r - 1) / r;
}

std::vector<size_t> DistributedSampler::indices() const {
  std::vector<size_t> order;
  if (shuffle_) {
    Rng rng(mix_seed(seed_, epoch_));
    order = permutation(n_, rng);
  } else {
    order.resize(n_);
    for (size_t i = 0; i < n_; ++i) order[i] = i;
  }
  const size_t total = per_rank_ * size_t(replicas_);
  // Pad by repeating the head (as often as needed for tiny datasets).
  for (size_t i = 0; order.size() < total && n_ > 0; ++i) order.push_back(order[i % n_]);
  std::vector<size_t> mine;
  mine.reserve(per_rank_);
  for (size_t i = size_t(rank_); i < total; i += size_t(replicas_)) mine.push_back(order[i]);
  return mine;
}

size_t DistributedSampler::num_batches(size_t batch_size) const {
  if (batch_size == 0) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "batch_size is 0; expected >= 1");
  return (per_rank_ + batch_size - 1) / batch_size;
}

}  // namespace hpu
