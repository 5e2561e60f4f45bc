// A communicator: one rank of a group, bound to one device. It owns this
// rank's transport endpoint and runs the group's operations on streams of its
// device, one at a time and in the order they start, numbering them (the
// sequence in each operation's header).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/algorithm.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "device/device.hpp"

namespace hpu::comm {

// One send or receive of hpuSend/hpuRecv.
struct P2POp {
  bool is_send;
  void *buf;
  size_t count;
  hpuDataType_t dtype;
  int peer;
};

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Joins the group (blocks until every rank has joined or the deadline).
  Communicator(Device &device, int nranks, const UniqueId &id, int rank);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device &device() const { return device_; }

  // Seconds each wait may take: the per-communicator value, else HPU_COMM_TIMEOUT.
  double timeout() const;
  void set_timeout(double seconds);  // 0 = back to HPU_COMM_TIMEOUT

  // Queues the collective that `header` names, on these buffers, on `stream`
  // as one operation of the group: it runs with the next sequence number,
  // after begin() on the transport; a failure inside it is named after the
  // operation and becomes the stream's sticky error. Throws the
  // communicator's sticky error instead, if there is one.
  void enqueue(Stream &stream, OpHeader header, const void *send, void *recv);
  // Queues sends and receives that progress together (a group, or one call).
  void enqueue_p2p(Stream &stream, std::vector<P2POp> ops);

  // The sticky error (HPU_SUCCESS if none) and its message.
  hpuStatus_t error(std::string *message) const { return transport_->error(message); }
  void throw_if_failed() const { transport_->throw_if_failed(); }
  // Fails every pending and later operation with HPU_ERROR_ABORTED. Any thread.
  void abort(const std::string &why) { transport_->abort(why); }
  // Waits until no queued operation of this communicator is left.
  void wait_idle();

 private:
  // A queued operation's hold on its communicator: counted as pending while
  // any copy lives (its closure runs or is discarded, then dies).
  class Queued {
   public:
    explicit Queued(std::shared_ptr<Communicator> c) : c_(std::move(c)) { c_->add_pending(1); }
    Queued(const Queued &o) : c_(o.c_) { c_->add_pending(1); }
    Queued(Queued &&o) noexcept = default;
    Queued &operator=(const Queued &) = delete;
    ~Queued() {
      if (c_) c_->add_pending(-1);
    }
    Communicator &operator*() const { return *c_; }
    Communicator *operator->() const { return c_.get(); }

   private:
    std::shared_ptr<Communicator> c_;
  };
  // A hold on this communicator for a new operation; throws the sticky error instead.
  Queued queue_one();
  void add_pending(int delta);
  void run_p2p(const std::vector<P2POp> &ops);

  Device &device_;
  const int rank_, size_;
  int group_ = 0;  // the group's number in this process (profiler tracks)
  std::unique_ptr<Bootstrap> bootstrap_;
  std::shared_ptr<Transport> transport_;
  std::atomic<double> timeout_{0.0};  // 0 = HPU_COMM_TIMEOUT

  std::mutex run_mu_;  // one operation at a time; guards what follows
  uint64_t seq_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_received_;  // per peer
  Scratch scratch_;

  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  int pending_ = 0;  // queued operations not yet finished or discarded
};

// One communicator per device of `devices`: ranks first_rank, first_rank + 1,
// ... of the nranks-rank group `id` names, joining at once (each in a thread of
// its own, since a join waits for every rank of the group). Entry i holds the
// communicator of devices[i], or the error its join threw.
struct Joined {
  std::shared_ptr<Communicator> comm;
  Error error{HPU_SUCCESS, ""};
};
std::vector<Joined> join_all(const std::vector<Device *> &devices, int nranks, const UniqueId &id, int first_rank);

Registry<Communicator> &comm_registry();

// The live communicator behind a handle; HPU_ERROR_INVALID_HANDLE otherwise.
std::shared_ptr<Communicator> comm_from_handle(hpuComm_t comm);

}  // namespace hpu::comm
