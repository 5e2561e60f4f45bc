// Direct collectives, for ranks that share one address space (threads of one
// process): each rank sends every peer the addresses of its buffers, does its
// share of the work straight between the ranks' buffers, then tells each peer
// it is done with that peer's buffers. Every input element is read once and
// every output element written once, by one rank, with no intermediate copies
// and two rounds of small messages.
//   - allreduce: rank r reduces its 1/n of the elements from the n inputs (in
//     rank order, combine_rank_order, as every layout does) and writes all n
//     outputs;
//   - reduce-scatter: rank r reduces its own block from the n inputs, in rank
//     order, into its output;
//   - allgather: rank r copies its input into its block of every output;
//   - broadcast: rank r copies its 1/n of the root's buffer into every output.
//
// Reductions go in blocks that stay in L2: a block's result is kept apart
// until every input of the block has been read, so an in-place rank's input is
// never overwritten before it is read.
#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/algorithm.hpp"

namespace hpu::comm {

namespace {

struct Buffers {
  const char *send;
  char *recv;
};

// Large enough for long runs through each input, small enough for L2.
constexpr size_t kBlockBytes = size_t(64) << 10;
// When the outputs of all ranks together are this large they will not stay in
// the cache, so out-of-place outputs are written with non-temporal stores
// (in-place outputs are in the cache already: their inputs were just read).
constexpr size_t kStreamingBytes = size_t(16) << 20;

// memcpy with non-temporal stores: it saves reading each line in before
// writing it.
void copy_streaming(char *dst, const char *src, size_t bytes) {
  size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  if (head > bytes) head = bytes;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
}

// Writes `bytes` at dst, with non-temporal stores when `streaming` and the
// copy is not in place.
void put(char *dst, const char *src, size_t bytes, bool streaming) {
  if (dst == src) return;
  if (streaming)
    copy_streaming(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

// The two rounds of messages around a direct collective: the constructor
// tells every peer this rank's buffers and learns theirs; finish() tells every
// peer that this rank is done with their buffers and waits until they all are
// done with this rank's.
class Exchange {
 public:
  Exchange(Ctx &c, const void *send, void *recv) : c_(c), buf_(static_cast<size_t>(c.size())) {
    const int n = c.size(), r = c.rank();
    buf_[static_cast<size_t>(r)] = {static_cast<const char *>(send), static_cast<char *>(recv)};
    std::vector<RequestPtr> addresses;
    for (int k = 1; k < n; ++k) {
      const int to = mod(r + k, n), from = mod(r - k, n);
      addresses.push_back(c.recv(from, 0, &buf_[static_cast<size_t>(from)], sizeof(Buffers)));
      addresses.push_back(c.send(to, 0, &buf_[static_cast<size_t>(r)], sizeof(Buffers)));
      done_.push_back(c.recv(from, 1, nullptr, 0));
    }
    c.wait(addresses);
  }

  const Buffers &operator[](size_t rank) const { return buf_[rank]; }
  const std::vector<Buffers> &all() const { return buf_; }

  void finish(bool streamed) {
    if (streamed) _mm_sfence();  // the streaming stores are seen before the messages below
    const int n = c_.size(), r = c_.rank();
    for (int k = 1; k < n; ++k) done_.push_back(c_.send(mod(r + k, n), 1, nullptr, 0));
    c_.wait(done_);
  }

 private:
  Ctx &c_;
  std::vector<Buffers> buf_;
  std::vector<RequestPtr> done_;
};

// Reduces elements [begin, begin + count) of the n inputs (at `offset` bytes
// into each) in rank order, a block at a time, handing each block's result to
// emit(element offset from begin, result, elements).
template <class Emit>
void reduce_blocks(Ctx &c, const Exchange &ex, size_t offset, size_t count, hpuDataType_t dtype, hpuRedOp_t op,
                   Emit emit) {
  const size_t n = static_cast<size_t>(c.size()), esize = dtype_bytes(dtype), per_block = kBlockBytes / esize;
  const Combine combine = make_combine(dtype, op, nullptr, /*local_first=*/true);  // op(so far, next input)
  auto *acc = static_cast<char *>(c.scratch(0, kBlockBytes));
  std::vector<const char *> in(n);
  for (size_t b = 0; b < count; b += per_block) {
    c.throw_if_failed();  // a failed peer may already be reusing its buffers: stop touching them
    const size_t m = std::min(per_block, count - b), off = offset + b * esize;
    for (size_t p = 0; p < n; ++p) in[p] = ex[p].send + off;
    combine_rank_order(combine, in.data(), static_cast<int>(n), acc, m);
    finish_average(acc, m, dtype, op, static_cast<int>(n));
    emit(b, acc, m);
  }
}

// Copies `bytes` from src to offset `offset` of every rank's output, a block at
// a time.
void copy_to_all(Ctx &c, const Exchange &ex, const char *src, size_t offset, size_t bytes, bool streaming) {
  for (size_t b = 0; b < bytes; b += kBlockBytes) {
    c.throw_if_failed();
    const size_t m = std::min(kBlockBytes, bytes - b);
    for (const Buffers &q : ex.all()) put(q.recv + offset + b, src + b, m, streaming);
  }
}

}  // namespace

void direct_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const auto n = static_cast<size_t>(c.size());
  Exchange ex(c, send, recv);
  const size_t esize = dtype_bytes(dtype);
  const Piece mine = split(count, n, static_cast<size_t>(c.rank()));
  const bool streaming = count * esize * n >= kStreamingBytes;
  reduce_blocks(c, ex, mine.begin * esize, mine.count, dtype, op, [&](size_t b, const char *acc, size_t m) {
    const size_t off = (mine.begin + b) * esize;
    for (const Buffers &q : ex.all()) {
      if (q.recv + off == q.send + off)
        std::memcpy(q.recv + off, acc, m * esize);  // in place: in the cache already
      else
        put(q.recv + off, acc, m * esize, streaming);
    }
  });
  ex.finish(streaming);
}

void direct_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype,
                          hpuRedOp_t op) {
  Exchange ex(c, send, recv);
  const size_t esize = dtype_bytes(dtype), offset = static_cast<size_t>(c.rank()) * recvcount * esize;
  char *out = static_cast<char *>(recv);
  reduce_blocks(c, ex, offset, recvcount, dtype, op,
                [&](size_t b, const char *acc, size_t m) { std::memcpy(out + b * esize, acc, m * esize); });
  ex.finish(false);
}

void direct_allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype) {
  const auto n = static_cast<size_t>(c.size());
  Exchange ex(c, send, recv);
  const size_t bytes = sendcount * dtype_bytes(dtype);
  const bool streaming = bytes * n * n >= kStreamingBytes;
  copy_to_all(c, ex, static_cast<const char *>(send), static_cast<size_t>(c.rank()) * bytes, bytes, streaming);
  ex.finish(streaming);
}

void direct_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root) {
  const auto n = static_cast<size_t>(c.size());
  Exchange ex(c, send, recv);
  const Piece mine = split(bytes, n, static_cast<size_t>(c.rank()));
  const bool streaming = bytes * n >= kStreamingBytes;
  copy_to_all(c, ex, ex[static_cast<size_t>(root)].send + mine.begin, mine.begin, mine.count, streaming);
  ex.finish(streaming);
}

}  // namespace hpu::comm
