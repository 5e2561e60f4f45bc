// Lightning's (PyTorch's) DistributedSampler: every rank sees a disjoint,
// equally long share of one permutation that depends only on (seed, epoch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpu {

class DistributedSampler {
 public:
  // The permutation of 0..dataset_size-1 (or the identity when !shuffle) is
  // padded by repeating its head until it divides evenly by num_replicas (or,
  // with drop_last, cut to a multiple); rank r takes positions r, r + R, ...
  // So with R ranks of batch B, step s covers exactly the samples a single rank
  // with batch R x B covers at step s. Throws hpu::Error for num_replicas < 1 or
  // rank outside [0, num_replicas).
  DistributedSampler(size_t dataset_size, int num_replicas = 1, int rank = 0, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }
  uint64_t seed() const { return seed_; }
  int rank() const { return rank_; }
  int num_replicas() const { return replicas_; }
  size_t size() const { return per_rank_; }  // samples this rank sees per epoch
  std::vector<size_t> indices() const;       // this rank's samples for the epoch
  // Number of batches of `batch_size` this rank runs per epoch (the last may be short).
  size_t num_batches(size_t batch_size) const;

 private:
  size_t n_;
  int replicas_, rank_;
  bool shuffle_;
  uint64_t seed_, epoch_ = 0;
  size_t per_rank_;
};

}  // namespace hpu
