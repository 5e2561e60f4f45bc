// The local bootstrap: ranks that are threads of one process meet in a
// process-wide table keyed by the id's secret.
#include "comm/bootstrap/local.hpp"

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

struct Group {
  explicit Group(int n) : nranks(n), joined(static_cast<size_t>(n), false) {}
  struct Round {
    size_t bytes = 0;
    int arrived = 0, left = 0;
    std::vector<bool> present;
    std::vector<uint8_t> data;
  };
  std::mutex mu;
  std::condition_variable cv;
  const int nranks;
  std::vector<bool> joined;
  std::map<uint64_t, Round> rounds;
};

struct GroupTable {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<Group>> groups;
};

GroupTable &group_table() {
  static auto *t = new GroupTable();  // never destroyed: ranks may still run at exit
  return *t;
}

class LocalBootstrap final : public Bootstrap {
 public:
  LocalBootstrap(std::shared_ptr<Group> group, int rank) : Bootstrap(rank, group->nranks), group_(std::move(group)) {}

  ~LocalBootstrap() override {
    std::lock_guard<std::mutex> lock(group_->mu);
    group_->joined[static_cast<size_t>(rank())] = false;
  }

  void allgather(const void *mine, size_t bytes, void *all, Deadline deadline) override {
    Group &g = *group_;
    uint64_t round = next_round_++;
    std::unique_lock<std::mutex> lock(g.mu);
    Group::Round &r = g.rounds[round];
    if (r.arrived == 0) {
      r.bytes = bytes;
      r.data.resize(bytes * static_cast<size_t>(size()));
      r.present.assign(static_cast<size_t>(size()), false);
    } else if (r.bytes != bytes) {
      fail(HPU_ERROR_INVALID_USAGE, "bootstrap: rank %d exchanges %zu bytes but other ranks %zu", rank(), bytes,
           r.bytes);
    }
    if (bytes) std::memcpy(r.data.data() + bytes * static_cast<size_t>(rank()), mine, bytes);
    r.present[static_cast<size_t>(rank())] = true;
    ++r.arrived;
    g.cv.notify_all();
    while (r.arrived < size()) {
      if (aborted_) fail(HPU_ERROR_ABORTED, "bootstrap of rank %d was aborted", rank());
      if (shutting_down()) fail(HPU_ERROR_ABORTED, "the process is exiting");
      auto now = Clock::now();
      if (now >= deadline) {
        std::string missing;
        for (int i = 0; i < size(); ++i)
          if (!r.present[static_cast<size_t>(i)]) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
        fail(HPU_ERROR_TIMEOUT, "bootstrap timed out: %d of %d ranks arrived (missing: %s)", r.arrived, size(),
             missing.c_str());
      }
      g.cv.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    }
    if (bytes) std::memcpy(all, r.data.data(), r.data.size());
    if (++r.left == size()) g.rounds.erase(round);
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(group_->mu);
    aborted_ = true;
    group_->cv.notify_all();
  }

 private:
  std::shared_ptr<Group> group_;
  uint64_t next_round_ = 0;
  bool aborted_ = false;  // guarded by group_->mu
};

}  // namespace

std::unique_ptr<Bootstrap> local_bootstrap(const UniqueId &id, int rank, int nranks) {
  GroupTable &t = group_table();
  std::string key(reinterpret_cast<const char *>(id.secret), sizeof id.secret);
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    for (auto it = t.groups.begin(); it != t.groups.end();)  // forget finished groups
      it = it->second.expired() ? t.groups.erase(it) : std::next(it);
    g = t.groups[key].lock();
    if (!g) {
      g = std::make_shared<Group>(nranks);
      t.groups[key] = g;
    }
  }
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->nranks != nranks)
    fail(HPU_ERROR_INVALID_USAGE, "rank %d joined unique id %s with nranks %d, but another rank with nranks %d", rank,
         id.short_name().c_str(), nranks, g->nranks);
  if (g->joined[static_cast<size_t>(rank)])
    fail(HPU_ERROR_INVALID_USAGE, "rank %d of unique id %s has already joined", rank, id.short_name().c_str());
  g->joined[static_cast<size_t>(rank)] = true;
  return std::make_unique<LocalBootstrap>(g, rank);
}

}  // namespace hpu::comm
