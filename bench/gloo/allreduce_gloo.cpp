// The Gloo peer of `hpu-bench allreduce-proc`: Gloo's ring allreduce
// (gloo::allreduce, Algorithm::RING, over its tcp transport on the loopback)
// on the same sizes, f32 sum. hpu-bench starts one process per rank; they
// meet through a gloo::rendezvous::FileStore in STORE_DIR. Rank 0 prints one
// line per size: "<bytes> <microseconds per allreduce>" (the slowest rank's).
// Usage: hpu-bench-gloo RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
// (ITERS 0: by size; WARMUP -1: as many as timed)
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void allreduce(const std::shared_ptr<gloo::Context> &ctx, float *send, float *recv, size_t count) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setInput(send, count);
  opts.setOutput(recv, count);
  opts.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

double slowest(const std::shared_ptr<gloo::Context> &ctx, double t) {
  double out = t;
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(&t, 1);
  opts.setOutput(&out, 1);
  opts.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::max<double>));
  gloo::allreduce(opts);
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: hpu-bench-gloo RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]), size = std::atoi(argv[2]);
  const std::string store_dir = argv[3];
  const size_t min = std::strtoull(argv[4], nullptr, 10), max = std::strtoull(argv[5], nullptr, 10);
  const double factor = std::atof(argv[6]);
  const int iters = std::atoi(argv[7]), warmup = std::atoi(argv[8]);

  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, device);

  std::vector<float> send(max / sizeof(float)), recv(max / sizeof(float));
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i % 7);
  for (double b = static_cast<double>(min); b <= static_cast<double>(max) * 1.0001; b *= factor) {
    const size_t bytes = static_cast<size_t>(b) / 4 * 4, count = bytes / sizeof(float);
    long n = iters > 0 ? iters : static_cast<long>((size_t(256) << 20) / bytes);
    n = n < 5 ? 5 : n > 1000 ? 1000 : n;
    for (long i = 0; i < (warmup < 0 ? n : warmup); ++i) allreduce(ctx, send.data(), recv.data(), count);
    slowest(ctx, 0);  // a barrier
    double t0 = now_seconds();
    for (long i = 0; i < n; ++i) allreduce(ctx, send.data(), recv.data(), count);
    double t = slowest(ctx, (now_seconds() - t0) / static_cast<double>(n));
    if (rank == 0) std::printf("%zu %.3f\n", bytes, t * 1e6);
    std::fflush(stdout);
    if (factor <= 1) break;
  }
  return 0;
}
