// Shared memory: ranks that all map one area (processes of one host over shm,
// Ctx::shared_area) meet there instead of exchanging messages. In a small
// allreduce each rank copies its input into its slot and counts itself in.
// Up to kAllCombineRanks ranks, every rank then waits until all have arrived
// and combines every slot itself, in rank order (so the result has the bits
// the message algorithms and the threads of one process give, on every
// rank): one meeting per call. With more ranks the last one to arrive combines the slots
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
// A larger allreduce is a reduce-scatter and an all-gather through the area,
// chunk by chunk (large_allreduce): each rank deposits the others' pieces of
// its chunk, combines its own piece of every rank's chunk (in rank order
// too), and copies the others' pieces of the result out:
// each byte is copied in and out once, where the message algorithms copy it
// into a ring and out again at every step. Two meetings per chunk, and a rank
// deposits its next chunk between them, so that with more ranks than CPUs a
// rank needs the CPU about once per chunk. Chunks have banks of their own.
//
// Every collective of the group, whatever its path, first announces its call
// in the area (shared_announce). A rank that has waited a while compares the
// calls its peers announce with its own, so a peer that went another way for
// the same call (counts on both sides of kMaxBytes, or another collective)
// fails the call at once rather than at the deadline.
//
// The area (shared_area_bytes): a control part (the arrival counter, the
// published call per bank, a header per rank and bank, an announcement and a
// large allreduce's progress per rank), then per bank n input slots and the
// result of small allreduces (kSmallSlot each), then the same of chunks
// (chunk_bytes each, 16 MiB at most in all): 5.5 MiB for 4 ranks. Pages
// cost memory only once touched.
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
// Up to this size allreduces meet once; above it the ranks share the
// combining (large_allreduce), which costs a second meeting.
constexpr size_t kMaxBytes = size_t(16) << 10;
// Bytes of a small allreduce's slot (at least kMaxBytes). Not a power of two:
// with 32 KiB slots, 4 ranks on 2 CPUs were often slower at 4 KiB (the slots
// of the ranks then map onto the same cache sets).
constexpr size_t kSmallSlot = size_t(36) << 10;
// Larger allreduces meet in the area chunk by chunk (large_allreduce), on 2
// ranks from kLargeMinBytesTwoRanks on: below it their one exchange of
// messages (gather_allreduce) is faster (the two cross between 42 and 48 KiB
// on 2 CPUs), where 4 ranks gain at every size past kMaxBytes.
constexpr size_t kLargeMinBytesTwoRanks = size_t(46) << 10;
// A large allreduce's chunk per rank and bank, and the most all their slots
// take together (with more than 15 ranks the chunks are smaller). 2 ranks
// move large messages a little faster with 512 than with 256 KiB chunks; 4
// ranks do not mind the chunk size.
constexpr size_t kChunkBytes = size_t(512) << 10;
constexpr size_t kLargeAreaBytes = size_t(16) << 20;
// A rank combines its piece of a chunk this many bytes at a time (the partial
// sums stay in L1).
constexpr size_t kReduceBlock = size_t(8) << 10;
// Up to this many ranks every rank combines all inputs itself: no rank waits
// for another's combining, which is faster at 2 ranks. From 3 ranks on, the
// CPUs combine every input once per rank they hold: with 4 ranks on 2 CPUs
// each CPU would combine every input twice (and 8 ranks four times), and one
// combining rank is faster there.
constexpr int kAllCombineRanks = 2;
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

// A large allreduce's progress on one rank. Chunks of every large call are
// numbered 1, 2, ... in order; chunk s uses bank s & 1.
struct alignas(64) Progress {
  std::atomic<uint64_t> deposited;  // the last chunk this rank deposited
  std::atomic<uint64_t> reduced;    // the last chunk whose piece it reduced
  std::atomic<int32_t> cpu;         // the CPU it ran on at either
  OpHeader header;                  // its large call (written before its first deposit)
};

// Bytes of a large allreduce's chunk per rank and bank: all banks' slots
// together stay within kLargeAreaBytes.
size_t chunk_bytes(int n) {
  return std::min(kChunkBytes, kLargeAreaBytes / (2 * (static_cast<size_t>(n) + 1)) & ~(kPage - 1));
}

size_t control_bytes(int n) {
  size_t b = sizeof(Control) + static_cast<size_t>(n) * (2 * sizeof(Deposit) + sizeof(Announcement) + sizeof(Progress));
  return (b + kPage - 1) & ~(kPage - 1);
}

struct Layout {
  int n = 0;
  size_t slot = kSmallSlot;  // bytes of a small allreduce's slot
  size_t chunk = 0;          // bytes of a large allreduce's slot
  char *base = nullptr;      // null: no area

  explicit Layout(const Ctx &c) : n(c.size()), chunk(chunk_bytes(n)) {
    SharedArea a = c.shared_area();
    if (!a.base || a.bytes < shared_area_bytes(n)) return;
    base = static_cast<char *>(a.base);
    data_ = base + control_bytes(n);
    large_ = data_ + 2 * (static_cast<size_t>(n) + 1) * slot;
  }
  Control &control() const { return *reinterpret_cast<Control *>(base); }
  Deposit &deposit(int bank, int rank) const {
    return reinterpret_cast<Deposit *>(base + sizeof(Control))[bank * n + rank];
  }
  Announcement &announcement(int rank) const {
    return reinterpret_cast<Announcement *>(base + sizeof(Control) + 2 * static_cast<size_t>(n) * sizeof(Deposit))[rank];
  }
  Progress &progress(int rank) const {
    return reinterpret_cast<Progress *>(base + sizeof(Control) +
                                        static_cast<size_t>(n) * (2 * sizeof(Deposit) + sizeof(Announcement)))[rank];
  }
  char *input(int bank, int rank) const { return data_ + (static_cast<size_t>(bank) * (n + 1) + rank) * slot; }
  char *result(int bank) const { return input(bank, n); }
  char *chunk_input(int bank, int rank) const {
    return large_ + (static_cast<size_t>(bank) * (n + 1) + rank) * chunk;
  }
  char *chunk_result(int bank) const { return chunk_input(bank, n); }

 private:
  char *data_ = nullptr;
  char *large_ = nullptr;
};

// The header rank q announced for call `seq`, when it did (a consistent copy).
bool announced(const Layout &l, int q, uint64_t seq, OpHeader &out) {
  Announcement &a = l.announcement(q);
  if (a.seq.load(std::memory_order_acquire) != seq) return false;
  out = a.header;
  std::atomic_thread_fence(std::memory_order_acquire);
  return a.seq.load(std::memory_order_relaxed) == seq;
}

// The ranks a wait in the area is for: pending(q) while rank q has not come,
// cpu(q) the CPU it last ran on, what(missing) the deadline's message.
struct SmallPeers {  // the deposits of a small allreduce
  const Layout &l;
  int bank;
  uint64_t call;
  bool pending(int q) const { return l.deposit(bank, q).call.load(std::memory_order_relaxed) != call; }
  int cpu(int q) const { return l.deposit(bank ^ 1, q).cpu.load(std::memory_order_relaxed); }  // at its last call
  std::string what(const std::string &missing) const {
    return strf("the shared-memory allreduce (call %llu): rank(s) %s have not arrived",
                static_cast<unsigned long long>(call), missing.c_str());
  }
};

struct LargePeers {  // one step of a large allreduce's chunk: every rank's deposit or reduction
  const Layout &l;
  std::atomic<uint64_t> Progress::*step;
  uint64_t chunk;
  bool pending(int q) const { return (l.progress(q).*step).load(std::memory_order_acquire) < chunk; }
  bool done() const {
    for (int q = 0; q < l.n; ++q)
      if (pending(q)) return false;
    return true;
  }
  int cpu(int q) const { return l.progress(q).cpu.load(std::memory_order_relaxed); }
  std::string what(const std::string &missing) const {
    return strf("the shared-memory allreduce (chunk %llu): rank(s) %s have not %s it",
                static_cast<unsigned long long>(chunk), missing.c_str(),
                step == &Progress::deposited ? "deposited" : "reduced their piece of");
  }
};

// A rank that waits spins (for at most kSpin) while no rank still to come
// last ran on its CPU: yielding would hand the CPU to a rank that waits as
// well, and the end of the wait would be seen a switch later. Once one of them
// needs this CPU, or after kSpin, it returns false (the caller's wait yields
// and then sleeps); true once done(). It looks at the CPUs first: the rank
// still to come that needs this CPU waits for the yield.
template <class Done, class Peers>
bool spin_while_others_run(int n, const Done &done, const Peers &peers) {
  constexpr auto kSpin = std::chrono::microseconds(20);
  if (done()) return true;
  const int here = sched_getcpu();
  auto one_here = [&] {
    for (int q = 0; q < n; ++q)
      if (peers.pending(q) && peers.cpu(q) == here) return true;
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

// Waits in the area until done(): spinning, then on the transport (its
// deadline and errors), comparing the peers' announced calls with this one's
// after kLooksBeforeChecks looks.
template <class Done, class Peers>
void wait_in_area(Ctx &c, const Layout &l, const Done &done, const Peers &peers) {
  if (spin_while_others_run(l.n, done, peers)) return;
  // The callbacks capture one pointer, which std::function keeps without
  // allocating.
  struct State {
    Ctx &c;
    const Layout &l;
    const Done &done;
    const Peers &peers;
    int looks;
  } s{c, l, done, peers, 0};
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
          if (s.peers.pending(q)) missing += (missing.empty() ? "" : ",") + std::to_string(q);
        return s.peers.what(missing.empty() ? "none" : missing);
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
// the CPUs that read it, which makes a small deposit several times faster.
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

// Combines the n inputs of a small allreduce in `bank` into `out`.
void combine_slots(Ctx &c, const Layout &l, int bank, char *out, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const char *few[8];
  auto **in = l.n <= 8 ? few : static_cast<const char **>(c.scratch(1, static_cast<size_t>(l.n) * sizeof(char *)));
  for (int q = 0; q < l.n; ++q) in[q] = l.input(bank, q);
  combine_rank_order(make_combine(dtype, op, nullptr, /*local_first=*/true), in, l.n, out, count);
}

// Piece i of a chunk of `count` elements of `esize` bytes: n nearly equal
// pieces cut at 64-byte lines, so that no two ranks write one line.
Piece chunk_piece(size_t count, size_t esize, int n, int i) {
  const size_t unit = 64 / esize;
  Piece p = split((count + unit - 1) / unit, static_cast<size_t>(n), static_cast<size_t>(i));
  const size_t begin = std::min(count, p.begin * unit), end = std::min(count, (p.begin + p.count) * unit);
  return {begin, end - begin};
}

// A large allreduce, chunk by chunk (Layout::chunk bytes per rank): every rank
// deposits the others' pieces of its chunk in its slot; once all have, each
// combines its own piece of every rank's input (its own from `send`) in
// rank order into the chunk's result and its `recv`; once all
// have, each copies the others' pieces of the result out. A rank deposits its
// next chunk (the other bank) before it waits for the others' pieces, so one
// pass through a chunk needs the CPU once.
//
// Chunk s + 1 reuses the slots of chunk s - 1, which every rank has finished
// reading (this rank waited for their pieces of s - 1), and its result is
// written once every rank has deposited s + 1, which each did after it copied
// s - 1 out.
void large_allreduce(Ctx &c, const Layout &l, const char *send, char *recv, size_t count, hpuDataType_t dtype,
                     hpuRedOp_t op) {
  const int n = l.n, r = c.rank();
  const size_t e = dtype_bytes(dtype), per_chunk = l.chunk / e;
  const size_t chunks = (count + per_chunk - 1) / per_chunk;
  Progress &mine = l.progress(r);
  const uint64_t first = mine.deposited.load(std::memory_order_relaxed) + 1;
  const Combine cb = make_combine(dtype, op, nullptr, /*local_first=*/true);  // out = op(local, in)
  auto **in = static_cast<const char **>(c.scratch(1, static_cast<size_t>(n) * sizeof(char *)));
  auto span = [&](size_t k) { return Piece{k * per_chunk, std::min(per_chunk, count - k * per_chunk)}; };
  auto mark = [&](std::atomic<uint64_t> &step, uint64_t s) {
    mine.cpu.store(sched_getcpu(), std::memory_order_relaxed);
    step.store(s, std::memory_order_release);
    c.wake_peers();
  };
  auto deposit = [&](size_t k) {
    const Piece ch = span(k), own = chunk_piece(ch.count, e, n, r);
    char *slot = l.chunk_input(static_cast<int>((first + k) & 1), r);
    const char *from = send + ch.begin * e;
    const size_t own_end = (own.begin + own.count) * e;
    std::memcpy(slot, from, own.begin * e);
    std::memcpy(slot + own_end, from + own_end, ch.count * e - own_end);
    mark(mine.deposited, first + k);
  };

  mine.header = c.header();
  deposit(0);
  for (size_t k = 0; k < chunks; ++k) {
    const uint64_t s = first + k;
    const int bank = static_cast<int>(s & 1);
    const Piece ch = span(k), own = chunk_piece(ch.count, e, n, r);
    const LargePeers deposits{l, &Progress::deposited, s};
    wait_in_area(c, l, [&] { return deposits.done(); }, deposits);
    if (k == 0)
      for (int q = 0; q < n; ++q) {  // each peer is in this call still: none leaves it before this rank reduced
        std::string m = header_mismatch(c.header(), r, l.progress(q).header, q);
        if (!m.empty()) c.fail_all(HPU_ERROR_INVALID_USAGE, m);
      }

    char *result = l.chunk_result(bank);
    char *out = recv + ch.begin * e;
    for (size_t b = 0; b < own.count; b += kReduceBlock / e) {
      const size_t m = std::min(kReduceBlock / e, own.count - b), o = (own.begin + b) * e;
      for (int q = 0; q < n; ++q) in[q] = q == r ? send + ch.begin * e + o : l.chunk_input(bank, q) + o;
      combine_rank_order(cb, in, n, result + o, m);
      finish_average(result + o, m, dtype, op, n);
      std::memcpy(out + o, result + o, m * e);  // after the combine: `send` may be `recv`
    }
    mark(mine.reduced, s);
    if (k + 1 < chunks) deposit(k + 1);

    const LargePeers pieces{l, &Progress::reduced, s};
    wait_in_area(c, l, [&] { return pieces.done(); }, pieces);
    const size_t own_end = (own.begin + own.count) * e;
    std::memcpy(out, result, own.begin * e);
    std::memcpy(out + own_end, result + own_end, ch.count * e - own_end);
  }
}

}  // namespace

size_t shared_area_bytes(int n) {
  return control_bytes(n) + 2 * (static_cast<size_t>(n) + 1) * (kSmallSlot + chunk_bytes(n));
}

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
  return Layout(c).base && (bytes <= kMaxBytes || c.size() > 2 || bytes >= kLargeMinBytesTwoRanks);
}

void shared_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const Layout l(c);
  const int n = c.size();
  const size_t bytes = count * dtype_bytes(dtype);
  if (!l.base) fail(HPU_ERROR_INTERNAL, "shared allreduce without a shared area");
  if (bytes > kMaxBytes)
    return large_allreduce(c, l, static_cast<const char *>(send), static_cast<char *>(recv), count, dtype, op);
  Control &ctl = l.control();
  const Arrival a = arrive(c, l, send, bytes);
  const SmallPeers peers{l, a.bank, a.call};

  if (n <= kAllCombineRanks) {
    const uint64_t all = a.call * static_cast<uint64_t>(n);
    if (a.last)
      c.wake_peers();
    else
      wait_in_area(c, l, [&] { return ctl.arrived.load(std::memory_order_acquire) >= all; }, peers);
    check_deposits(c, l, a.bank);
    claim_next_slot(l, a.bank, c.rank(), bytes);
    combine_slots(c, l, a.bank, static_cast<char *>(recv), count, dtype, op);
    finish_average(recv, count, dtype, op, n);
    return;
  }

  if (a.last) {
    check_deposits(c, l, a.bank);
    combine_slots(c, l, a.bank, l.result(a.bank), count, dtype, op);
    finish_average(l.result(a.bank), count, dtype, op, n);
    ctl.published[a.bank].store(a.call, std::memory_order_release);
    c.wake_peers();
  } else {
    wait_in_area(c, l, [&] { return ctl.published[a.bank].load(std::memory_order_acquire) == a.call; }, peers);
  }
  std::memcpy(recv, l.result(a.bank), bytes);
}

}  // namespace hpu::comm
