// Direct allreduce, for ranks that share one address space (threads of one
// process): each rank sends every peer the addresses of its buffers, reduces
// its own 1/n of the elements straight from the n inputs (in rank order) and
// writes the result into all n outputs, then tells each peer it is done with
// that peer's buffers. Every input element is read once and every output
// element written once, by one rank, so every rank gets the same bits, with
// no intermediate copies and two rounds of small messages.
//
// The work goes in blocks that stay in L2: a block's result is kept apart
// until every input of the block has been read, so an in-place rank's input is
// never overwritten before it is read.
#include <emmintrin.h>

#include <cstdint>
#include <cstring>

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

}  // namespace

void direct_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const auto N = static_cast<size_t>(n);
  std::vector<Buffers> buf(N);
  buf[static_cast<size_t>(r)] = {static_cast<const char *>(send), static_cast<char *>(recv)};
  std::vector<RequestPtr> addresses, done;
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    addresses.push_back(c.recv(from, 0, &buf[static_cast<size_t>(from)], sizeof(Buffers)));
    addresses.push_back(c.send(to, 0, &buf[static_cast<size_t>(r)], sizeof(Buffers)));
    done.push_back(c.recv(from, 1, nullptr, 0));
  }
  c.wait(addresses);

  const size_t esize = dtype_bytes(dtype), per_block = kBlockBytes / esize;
  const Combine combine = make_combine(dtype, op, nullptr, /*local_first=*/true);  // op(so far, next input)
  const Piece mine = split(count, N, static_cast<size_t>(r));
  const bool streaming = count * esize * N >= kStreamingBytes;
  auto *acc = static_cast<char *>(c.scratch(0, kBlockBytes));
  for (size_t b = mine.begin, end = mine.begin + mine.count; b < end; b += per_block) {
    c.throw_if_failed();  // a failed peer may already be reusing its buffers: stop touching them
    const size_t m = std::min(per_block, end - b), off = b * esize;
    combine.fn(acc, buf[1].send + off, buf[0].send + off, m, combine.ctx);
    for (size_t p = 2; p < N; ++p) combine.fn(acc, buf[p].send + off, acc, m, combine.ctx);
    finish_average(acc, m, dtype, op, n);
    for (const Buffers &q : buf) {
      if (streaming && q.recv != q.send)
        copy_streaming(q.recv + off, acc, m * esize);
      else
        std::memcpy(q.recv + off, acc, m * esize);
    }
  }
  if (streaming) _mm_sfence();  // the streaming stores are seen before the messages below

  for (int k = 1; k < n; ++k) done.push_back(c.send(mod(r + k, n), 1, nullptr, 0));
  c.wait(done);
}

}  // namespace hpu::comm
