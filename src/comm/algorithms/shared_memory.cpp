// Shared memory: ranks that all map one area (processes of one host over shm,
// Ctx::shared_area) meet there instead of exchanging messages. In a small
// allreduce each rank copies its input into its slot and counts itself in.
// Up to kAllCombineRanks ranks, every rank then waits until all have arrived
// and combines every slot itself, in recursive doubling's order (so the
// result has the bits the message algorithms give, on every rank): one
// meeting per call. With more ranks the last one to arrive combines the slots
// alone, publishes the result, and every rank copies it out: a rank copies in
// once and out once, where combining every slot would make each rank read them
// all. A waiting rank watches one word: with more ranks than CPUs each rank
// needs the CPU about once per call, where an exchange needs it once per
// round. It spins while the ranks still to come last ran on other CPUs, and
// yields its CPU (then sleeps) otherwise.
//
// Calls alternate between two banks, so that a rank that is done can deposit
// for the next call while slower ones still read this one's slots or result:
// call k + 2 reuses call k's bank only after every rank arrived for call
// k + 1, which each did only after it was done with call k.
//
// Every collective of the group, whatever its path, first announces its call
// in the area (shared_announce). A rank that has waited a while compares the
// calls its peers announce with its own, so a peer that went another way for
// the same call (counts on both sides of kMaxBytes, or another collective)
// fails the call at once rather than at the deadline.
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
// Up to this many ranks every rank combines all inputs itself: no rank waits
// for another's combining. 4 ranks on 2 CPUs, 4 KiB: median 5.75 -> 4.86 us
// (8 alternating runs), 8 and 16 KiB no slower; 2 ranks 2.05 -> 1.67 us.
// 8 ranks on 2 CPUs, where each CPU would combine every input four times:
// 4 KiB 12.4 us, 16 KiB 23.8 us, against 11.1 and 18.9 us with one combining
// rank.
constexpr int kAllCombineRanks = 4;
// A waiting rank compares its peers' announcements with its own call after
// this many looks (reading them costs a cache miss per peer and look).
constexpr int kLooksBeforeChecks = 8;

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

// The value of the inputs of `bank` that are values [lo, hi) of recursive
// doubling's p (value v is ranks 2v and 2v + 1 combined for v < extra, else
// rank v + extra's input), combined pairwise, lower first, level by level: in
// `dst`, or the input itself for a single value that was not folded. The
// right half goes to tmp[0] (its own right half to tmp[1], ...), so the
// inputs are only read.
const char *tree_value(const Layout &l, int bank, int lo, int hi, int extra, char *dst, char *const *tmp,
                       const Combine &cb, size_t count) {
  auto combine = [&](char *out, const char *first, const char *second) { cb.fn(out, second, first, count, cb.ctx); };
  if (hi - lo == 1) {
    if (lo >= extra) return l.input(bank, lo + extra);
    combine(dst, l.input(bank, 2 * lo), l.input(bank, 2 * lo + 1));
    return dst;
  }
  const int mid = lo + (hi - lo) / 2;
  const char *left = tree_value(l, bank, lo, mid, extra, dst, tmp + 1, cb, count);
  const char *right = tree_value(l, bank, mid, hi, extra, tmp[0], tmp + 1, cb, count);
  combine(dst, left, right);
  return dst;
}

// Combines the n inputs of `bank` into `out` in recursive doubling's order
// (so the result has the bits the message algorithms give), reading them only.
void combine_all(Ctx &c, const Layout &l, int bank, char *out, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  // The tree's right halves need log2(p) - 1 buffers, and one more when a
  // right leaf is folded (value 1, so extra > 1): none for 2 or 3 ranks, one
  // for 4, two for 6.
  int p = 1, levels = -1;
  while (p * 2 <= l.n) p *= 2, ++levels;
  if (l.n - p > 1) ++levels;
  const size_t stride = (count * dtype_bytes(dtype) + 63) & ~size_t(63);
  char *tmp[32] = {};
  auto *scratch = levels > 0 ? static_cast<char *>(c.scratch(0, stride * static_cast<size_t>(levels))) : nullptr;
  for (int d = 0; d < levels; ++d) tmp[d] = scratch + static_cast<size_t>(d) * stride;
  const Combine cb = make_combine(dtype, op, nullptr, /*local_first=*/true);  // out = op(local, in)
  tree_value(l, bank, 0, p, l.n - p, out, tmp, cb, count);
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
// well, and the end of the wait would be seen a switch later. Once one of them
// needs this CPU, or after kSpin, it returns false (the caller's wait yields
// and then sleeps); true once done(). It looks at the CPUs first: the rank
// still to come that needs this CPU waits for the yield.
template <class Done>
bool spin_while_others_run(const Layout &l, int bank, uint64_t call, const Done &done) {
  constexpr auto kSpin = std::chrono::microseconds(20);
  if (done()) return true;
  const int here = sched_getcpu();
  auto one_here = [&] {
    for (int q = 0; q < l.n; ++q)
      if (l.deposit(bank, q).call.load(std::memory_order_relaxed) != call &&
          l.deposit(bank ^ 1, q).cpu.load(std::memory_order_relaxed) == here)
        return true;
    return false;
  };
  if (one_here()) return false;
  const auto until = Clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (one_here() || Clock::now() > until) return false;
  }
}

// Waits in the area until done() for this rank's `call` in `bank`: spinning,
// then on the transport (its deadline and errors), comparing the peers'
// announced calls with this one's after kLooksBeforeChecks looks.
template <class Done>
void wait_in_area(Ctx &c, const Layout &l, int bank, uint64_t call, const Done &done) {
  if (spin_while_others_run(l, bank, call, done)) return;
  // The callbacks capture one pointer, which std::function keeps without
  // allocating.
  struct State {
    Ctx &c;
    const Layout &l;
    int bank;
    uint64_t call;
    const Done &done;
    int looks;
  } s{c, l, bank, call, done, 0};
  c.wait_until(
      [&s] {
        if (s.done()) return true;
        if (++s.looks < kLooksBeforeChecks) return false;
        const int r = s.c.rank();
        for (int q = 0; q < s.l.n; ++q) {
          OpHeader theirs;
          if (q == r || !announced(s.l, q, s.c.header().seq, theirs)) continue;
          std::string m = header_mismatch(s.c.header(), r, theirs, q);
          if (!m.empty()) s.c.fail_all(HPU_ERROR_INVALID_USAGE, m);
        }
        return false;
      },
      [&s] {
        std::string missing;
        for (int q = 0; q < s.l.n; ++q)
          if (s.l.deposit(s.bank, q).call.load(std::memory_order_relaxed) != s.call)
            missing += (missing.empty() ? "" : ",") + std::to_string(q);
        return strf("the shared-memory allreduce (call %llu): rank(s) %s have not arrived",
                    static_cast<unsigned long long>(s.call), missing.empty() ? "none" : missing.c_str());
      });
}

// Fails the group when a deposit of `bank` is for another call than this rank's.
void check_deposits(Ctx &c, const Layout &l, int bank) {
  for (int q = 0; q < l.n; ++q) {
    std::string m = header_mismatch(c.header(), c.rank(), l.deposit(bank, q).header, q);
    if (!m.empty()) c.fail_all(HPU_ERROR_INVALID_USAGE, m);
  }
}

// Asks for this rank's slot and deposit in the other bank, which every rank is
// done with once all have arrived for this call, in this CPU's cache for
// writing (prefetchw; older x86 CPUs take it as a no-op), while it combines:
// its next deposit then writes lines this CPU holds instead of taking each from
// the CPUs that read it. 4 KiB: a deposit 0.55 -> 0.13-0.2 us (median, timed
// around it), 2 ranks 1.56-1.63 -> 1.41-1.48 us per call.
void claim_next_slot(const Layout &l, int bank, int rank, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const char *slot = l.input(bank ^ 1, rank);
  for (size_t o = 0; o < bytes; o += 64) asm volatile("prefetchw %0" ::"m"(slot[o]));
  asm volatile("prefetchw %0" ::"m"(*reinterpret_cast<const char *>(&l.deposit(bank ^ 1, rank))));
#else
  (void)l, (void)bank, (void)rank, (void)bytes;
#endif
}

// This rank's deposit of its input for its next call.
struct Arrival {
  uint64_t call;  // this rank's calls are numbered by its deposits: 1, 2, ...
  int bank;
  bool last;      // the last of the n ranks to arrive for `call`
};

Arrival arrive(Ctx &c, const Layout &l, const void *send, size_t bytes) {
  const int r = c.rank();
  Arrival a;
  a.call = std::max(l.deposit(0, r).call.load(std::memory_order_relaxed),
                    l.deposit(1, r).call.load(std::memory_order_relaxed)) + 1;
  a.bank = static_cast<int>(a.call & 1);
  std::memcpy(l.input(a.bank, r), send, bytes);
  Deposit &mine = l.deposit(a.bank, r);
  mine.header = c.header();
  mine.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  mine.call.store(a.call, std::memory_order_relaxed);
  a.last = l.control().arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == a.call * static_cast<uint64_t>(l.n);
  return a;
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
  const int n = c.size();
  const size_t bytes = count * dtype_bytes(dtype);
  if (bytes > l.slot) fail(HPU_ERROR_INTERNAL, "shared allreduce of %zu bytes: slots hold %zu", bytes, l.slot);
  Control &ctl = l.control();
  const Arrival a = arrive(c, l, send, bytes);

  if (n <= kAllCombineRanks) {
    const uint64_t all = a.call * static_cast<uint64_t>(n);
    if (a.last)
      c.wake_peers();
    else
      wait_in_area(c, l, a.bank, a.call, [&] { return ctl.arrived.load(std::memory_order_acquire) >= all; });
    check_deposits(c, l, a.bank);
    claim_next_slot(l, a.bank, c.rank(), bytes);
    combine_all(c, l, a.bank, static_cast<char *>(recv), count, dtype, op);
    finish_average(recv, count, dtype, op, n);
    return;
  }

  if (a.last) {
    check_deposits(c, l, a.bank);
    combine_all(c, l, a.bank, l.result(a.bank), count, dtype, op);
    finish_average(l.result(a.bank), count, dtype, op, n);
    ctl.published[a.bank].store(a.call, std::memory_order_release);
    c.wake_peers();
  } else {
    wait_in_area(c, l, a.bank, a.call,
                 [&] { return ctl.published[a.bank].load(std::memory_order_acquire) == a.call; });
  }
  std::memcpy(recv, l.result(a.bank), bytes);
}

}  // namespace hpu::comm
