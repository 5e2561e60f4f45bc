// Shared memory: ranks that all map one area (processes of one host over shm,
// Ctx::shared_area) meet there instead of exchanging messages. In a small
// allreduce each rank copies its input into its slot and counts itself in; the
// last one to arrive checks that every rank made the same call, combines the
// slots in recursive doubling's order (so the result has the bits the message
// algorithms give), publishes it, and every rank copies it out. A rank copies
// in once and out once, and a waiting rank watches one word: with more ranks
// than CPUs each rank needs the CPU about once per call, where an exchange
// needs it once per round. A waiting rank spins while the ranks still to
// come last ran on other CPUs, and yields its CPU (then sleeps) otherwise.
//
// Calls alternate between two banks, so that a rank that is done can deposit
// for the next call while slower ones still copy out this one's result: call
// k + 2 reuses call k's bank only after call k + 1's result is out, which
// needed every rank's deposit for k + 1, which each made only after copying
// call k's result out.
//
// Every collective of the group, whatever its path, first announces its call
// in the area (shared_announce). A rank waiting there compares the calls its
// peers announce with its own, so a peer that went another way for the same
// call (counts on both sides of kMaxBytes, or another collective) fails the
// call at once rather than at the deadline.
//
// The area: a control part (the arrival counter, the published call per bank,
// a header per rank and bank, an announcement per rank), then per bank n input
// slots and the result.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "comm/algorithm.hpp"
#include "core/error.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kPage = 4096;
// Above this the exchanges of recursive doubling and the ring, which work in
// parallel, beat one rank combining every input alone.
constexpr size_t kMaxBytes = size_t(16) << 10;

struct alignas(64) Control {
  std::atomic<uint64_t> arrived;  // deposits, every call's together: call k's last makes it k * n
  alignas(64) std::atomic<uint64_t> published[2];  // per bank: the call whose result it holds
};

struct alignas(64) Deposit {
  std::atomic<uint64_t> call;  // the last call this rank deposited for in this bank (1, 2, ...)
  std::atomic<int32_t> cpu;    // the CPU it ran on then
  OpHeader header;
};

// Written as a sequence lock: seq is 0 while the header changes.
struct alignas(64) Announcement {
  std::atomic<uint64_t> seq;  // the call whose header follows
  OpHeader header;
};

struct Layout {
  int n = 0;
  size_t slot = 0;  // bytes of a slot (0: no area)
  char *base = nullptr;

  explicit Layout(const Ctx &c) : n(c.size()) {
    SharedArea a = c.shared_area();
    size_t control = sizeof(Control) + static_cast<size_t>(n) * (2 * sizeof(Deposit) + sizeof(Announcement));
    control = (control + kPage - 1) & ~(kPage - 1);
    if (!a.base || a.bytes < control) return;
    base = static_cast<char *>(a.base);
    slot = (a.bytes - control) / (2 * (static_cast<size_t>(n) + 1)) & ~(kPage - 1);
    data_ = base + control;
  }
  Control &control() const { return *reinterpret_cast<Control *>(base); }
  Deposit &deposit(int bank, int rank) const {
    return reinterpret_cast<Deposit *>(base + sizeof(Control))[bank * n + rank];
  }
  Announcement &announcement(int rank) const {
    return reinterpret_cast<Announcement *>(base + sizeof(Control) + 2 * static_cast<size_t>(n) * sizeof(Deposit))[rank];
  }
  char *input(int bank, int rank) const { return data_ + (static_cast<size_t>(bank) * (n + 1) + rank) * slot; }
  char *result(int bank) const { return input(bank, n); }

 private:
  char *data_ = nullptr;
};

// Combines the n inputs of `bank` into `out` in recursive doubling's order:
// ranks 2v and 2v + 1 first while n exceeds a power of two p, then the p
// values pairwise, lower first, level by level. Intermediate values overwrite
// the inputs (only the combining rank reads them).
void combine_all(const Layout &l, int bank, char *out, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  int p = 1;
  while (p * 2 <= l.n) p *= 2;
  const int extra = l.n - p;
  const Combine cb = make_combine(dtype, op, nullptr, /*local_first=*/true);  // out = op(local, in)
  auto combine = [&](char *dst, const char *first, const char *second) { cb.fn(dst, second, first, count, cb.ctx); };
  // Value v of the p lives in rank 2v's input (folded) or rank v + extra's.
  auto value = [&](int v) { return l.input(bank, v < extra ? 2 * v : v + extra); };
  for (int v = 0; v < extra; ++v) combine(value(v), value(v), l.input(bank, 2 * v + 1));
  for (int stride = 1; stride < p; stride *= 2)
    for (int v = 0; v < p; v += 2 * stride) combine(2 * stride == p ? out : value(v), value(v), value(v + stride));
}

// The header rank q announced for call `seq`, when it did (a consistent copy).
bool announced(const Layout &l, int q, uint64_t seq, OpHeader &out) {
  Announcement &a = l.announcement(q);
  if (a.seq.load(std::memory_order_acquire) != seq) return false;
  out = a.header;
  std::atomic_thread_fence(std::memory_order_acquire);
  return a.seq.load(std::memory_order_relaxed) == seq;
}

// A rank that waits spins (for at most kSpin) while no rank still to come
// last ran on its CPU: yielding would hand the CPU to a rank that waits as
// well, and the result would be seen a switch later. Once one of them needs
// this CPU, or after kSpin, the caller's wait yields and then sleeps.
void spin_while_others_run(const Layout &l, int bank, uint64_t call) {
  constexpr auto kSpin = std::chrono::microseconds(20);
  const int here = sched_getcpu();
  const auto until = Clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (l.control().published[bank].load(std::memory_order_acquire) == call) return;
      cpu_relax();
    }
    for (int q = 0; q < l.n; ++q)
      if (l.deposit(bank, q).call.load(std::memory_order_relaxed) != call &&
          l.deposit(bank ^ 1, q).cpu.load(std::memory_order_relaxed) == here)
        return;
    if (Clock::now() > until) return;
  }
}

}  // namespace

void shared_announce(const Ctx &c) {
  const Layout l(c);
  if (!l.base) return;
  Announcement &a = l.announcement(c.rank());
  a.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  a.header = c.header();
  a.seq.store(c.header().seq, std::memory_order_release);
}

bool shared_allreduce_fits(const Ctx &c, size_t bytes) {
  Layout l(c);
  return bytes <= kMaxBytes && bytes <= l.slot;
}

void shared_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const Layout l(c);
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * dtype_bytes(dtype);
  if (bytes > l.slot) fail(HPU_ERROR_INTERNAL, "shared allreduce of %zu bytes: slots hold %zu", bytes, l.slot);
  Control &ctl = l.control();
  // This rank's calls are numbered by its deposits: one more than its last.
  const uint64_t call = std::max(l.deposit(0, r).call.load(std::memory_order_relaxed),
                                 l.deposit(1, r).call.load(std::memory_order_relaxed)) + 1;
  const int bank = static_cast<int>(call & 1);

  std::memcpy(l.input(bank, r), send, bytes);
  Deposit &mine = l.deposit(bank, r);
  mine.header = c.header();
  mine.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  mine.call.store(call, std::memory_order_relaxed);
  const bool last = ctl.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == call * static_cast<uint64_t>(n);

  if (last) {
    for (int q = 0; q < n; ++q) {
      std::string m = header_mismatch(c.header(), r, l.deposit(bank, q).header, q);
      if (!m.empty()) c.fail_all(HPU_ERROR_INVALID_USAGE, m);
    }
    combine_all(l, bank, l.result(bank), count, dtype, op);
    finish_average(l.result(bank), count, dtype, op, n);
    ctl.published[bank].store(call, std::memory_order_release);
    c.wake_peers();
  } else {
    auto ready = [&] {
      if (ctl.published[bank].load(std::memory_order_acquire) == call) return true;
      for (int q = 0; q < n; ++q) {
        OpHeader theirs;
        if (q == r || !announced(l, q, c.header().seq, theirs)) continue;
        std::string m = header_mismatch(c.header(), r, theirs, q);
        if (!m.empty()) c.fail_all(HPU_ERROR_INVALID_USAGE, m);
      }
      return false;
    };
    spin_while_others_run(l, bank, call);
    c.wait_until(ready,
                 [&] {
                   std::string missing;
                   for (int q = 0; q < n; ++q)
                     if (l.deposit(bank, q).call.load(std::memory_order_relaxed) != call)
                       missing += (missing.empty() ? "" : ",") + std::to_string(q);
                   return strf("the shared-memory allreduce (call %llu): rank(s) %s have not arrived",
                               static_cast<unsigned long long>(call), missing.empty() ? "none" : missing.c_str());
                 });
  }
  std::memcpy(recv, l.result(bank), bytes);
}

}  // namespace hpu::comm
