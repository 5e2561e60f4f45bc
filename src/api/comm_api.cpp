// Communicators and collectives at the C boundary: argument checks, then the
// operation is queued on the stream (src/comm).
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "api/api.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/bootstrap/socket.hpp"
#include "comm/communicator.hpp"
#include "comm/group.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "device/allocator.hpp"
#include "kernels/dtype.hpp"

using namespace hpu;
using namespace hpu::comm;

namespace {

constexpr int kMaxRanks = 1 << 16;
constexpr double kMaxTimeout = 7 * 24 * 3600.0;

void check_dtype(hpuDataType_t dtype) {
  HPU_CHECK_ARG(kernels::dtype_valid(dtype), "dtype %d is not an hpuDataType_t", static_cast<int>(dtype));
}

void check_op(hpuRedOp_t op, hpuDataType_t dtype) {
  HPU_CHECK_ARG(op >= 0 && op < HPU_NUM_RED_OPS, "op %d is not an hpuRedOp_t", static_cast<int>(op));
  if (dtype == HPU_BOOL && op == HPU_AVG)
    fail(HPU_ERROR_UNSUPPORTED, "op HPU_AVG is not defined for dtype HPU_BOOL (use HPU_SUM or HPU_MAX for OR)");
}

// count elements of dtype, times `times` (ranks), in bytes; rejects overflow.
size_t bytes_of(size_t count, hpuDataType_t dtype, size_t times, const char *name) {
  size_t e = dtype_bytes(dtype);
  HPU_CHECK_ARG(count <= SIZE_MAX / e / times, "%s %zu is too large", name, count);
  return count * e * times;
}

void check_buffer(const void *p, size_t bytes, const char *name, const Communicator &c) {
  if (bytes == 0) return;
  HPU_CHECK_ARG(p != nullptr, "%s is NULL", name);
  DeviceMemory m = device_memory(p, bytes, name);
  if (m.device != &c.device())
    fail(HPU_ERROR_INVALID_HANDLE, "%s %p (+%zu bytes) is memory of device %d, not of device %d, the communicator's "
         "device", name, p, bytes, m.device->ordinal(), c.device().ordinal());
}

// The two ranges are the same (in place, when `in_place` is where b starts
// for it) or do not overlap.
void check_overlap(const void *a, size_t na, const char *an, const void *b, size_t nb, const char *bn,
                   const void *in_place, const char *rule) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (na == 0 || nb == 0 || b == in_place) return;
  if (x < y + nb && y < x + na)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s %p and %s %p overlap, but not in place (in place means %s)", an, a, bn, b,
         rule);
}

void check_root(int root, const Communicator &c, const char *name) {
  HPU_CHECK_ARG(root >= 0 && root < c.size(), "%s %d is out of range for %d ranks (0..%d)", name, root, c.size(),
                c.size() - 1);
}

std::shared_ptr<Stream> stream_of(hpuStream_t stream, Communicator &c) {
  auto s = stream_from_handle(stream, &c.device());
  if (&s->device() != &c.device())
    fail(HPU_ERROR_INVALID_ARGUMENT, "stream %p belongs to device %d, but the communicator to device %d",
         static_cast<void *>(stream), s->device().ordinal(), c.device().ordinal());
  return s;
}

OpHeader header(CollKind kind, hpuDataType_t dtype, size_t count, int root, hpuRedOp_t op) {
  OpHeader h;
  h.coll = static_cast<uint32_t>(kind);
  h.dtype = static_cast<uint32_t>(dtype);
  h.count = count;
  h.root = root;
  h.redop = static_cast<uint32_t>(op);
  return h;
}

void submit(std::shared_ptr<Communicator> c, hpuStream_t stream, const OpHeader &h, const void *send, void *recv) {
  auto s = stream_of(stream, *c);
  issue_or_record(std::move(c), std::move(s), h, send, recv);
}

// The devices behind `devs` ("devs[i]: ..." for a bad handle); `distinct`:
// each at most once.
std::vector<Device *> devices_of(const hpuDevice_t *devs, int ndev, bool distinct = true) {
  std::vector<Device *> d(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    try {
      d[static_cast<size_t>(i)] = &device_from_handle(devs[i]);
    } catch (const Error &e) {
      fail(e.status(), "devs[%d]: %s", i, e.what());
    }
    for (int j = 0; j < i && distinct; ++j)
      HPU_CHECK_ARG(d[static_cast<size_t>(j)] != d[static_cast<size_t>(i)],
                    "devs[%d] and devs[%d] are the same device (%d)", j, i, d[static_cast<size_t>(i)]->ordinal());
  }
  return d;
}

// A group of one communicator per device, all in this process.
void init_all(hpuComm_t *comms, const std::vector<Device *> &devices) {
  const int n = static_cast<int>(devices.size());
  std::vector<Joined> joined = join_all(devices, n, UniqueId::make(), 0);
  for (int r = 0; r < n; ++r) {
    const Error &e = joined[static_cast<size_t>(r)].error;
    if (e.status() != HPU_SUCCESS) fail(e.status(), "rank %d: %s", r, e.what());
  }
  for (int r = 0; r < n; ++r)
    comms[r] = reinterpret_cast<hpuComm_t>(comm_registry().add(std::move(joined[static_cast<size_t>(r)].comm)));
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuGetUniqueId(hpuUniqueId_t *id) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(id != nullptr, "id is NULL");
  UniqueId u = UniqueId::make();
  socket_root_start(u);  // so that the id works in other processes too, as in NCCL
  *id = u.to_public();
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommInitRank(hpuComm_t *comm, hpuDevice_t dev, int nranks, const hpuUniqueId_t *id, int rank) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(comm != nullptr, "comm is NULL");
  Device &d = device_from_handle(dev);
  HPU_CHECK_ARG(nranks >= 1 && nranks <= kMaxRanks, "nranks %d is out of range (1..%d)", nranks, kMaxRanks);
  HPU_CHECK_ARG(id != nullptr, "id is NULL");
  HPU_CHECK_ARG(rank >= 0 && rank < nranks, "rank %d is out of range for nranks %d (0..%d)", rank, nranks,
                nranks - 1);
  UniqueId u = UniqueId::from(*id, "id");
  auto c = std::make_shared<Communicator>(d, nranks, u, rank);
  *comm = reinterpret_cast<hpuComm_t>(comm_registry().add(std::move(c)));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommInitAll(hpuComm_t *comms, int ndev, const hpuDevice_t *devs) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(comms != nullptr, "comms is NULL");
  HPU_CHECK_ARG(ndev >= 1 && ndev <= kMaxRanks, "ndev %d is out of range (1..%d)", ndev, kMaxRanks);
  HPU_CHECK_ARG(devs != nullptr, "devs is NULL");
  init_all(comms, devices_of(devs, ndev));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommInitFromEnv(hpuComm_t *comms, int ndev, const hpuDevice_t *devs) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(comms != nullptr, "comms is NULL");
  HPU_CHECK_ARG(ndev >= 1 && ndev <= 4096, "ndev is %d; expected 1 to 4096", ndev);
  HPU_CHECK_ARG(devs != nullptr, "devs is NULL");
  // HPU_* settings from the configuration; the launcher's variables from the environment.
  const Config config = config_now();
  LaunchEnv env = read_launch_env([&config](const char *name) {
    return strncmp(name, "HPU_", 4) == 0 ? config.launch_value(name) : getenv(name);
  }, ndev);
  long long world = static_cast<long long>(env.size) * ndev;
  if (world > INT_MAX) fail(HPU_ERROR_CONFIG, "%d processes x %d devices is too many ranks", env.size, ndev);
  HPU_LOG(info, "comm", "launch environment: %s, process %d of %d (local %d), %d device(s) each: ranks %d..%d of %lld%s",
          env.source.c_str(), env.rank, env.size, env.local_rank, ndev, env.rank * ndev, env.rank * ndev + ndev - 1,
          world,
          env.host.empty() ? "" : strf("; rendezvous %s:%u from %s; secret %s", env.host.c_str(), env.port,
                                       env.address_source.c_str(), env.secret_source.c_str()).c_str());
  if (env.size == 1 && env.host.empty()) {
    init_all(comms, devices_of(devs, ndev));
    return HPU_SUCCESS;
  }
  std::vector<Device *> d = devices_of(devs, ndev, false);
  UniqueId id = launch_rendezvous(env);
  std::vector<Joined> joined = join_all(d, static_cast<int>(world), id, env.rank * ndev);
  int worst = -1;
  for (int i = 0; i < ndev; ++i) {  // the root cause first: an abort or timeout is often a consequence
    hpuStatus_t s = joined[static_cast<size_t>(i)].error.status();
    if (s != HPU_SUCCESS && (worst < 0 || joined[static_cast<size_t>(worst)].error.status() == HPU_ERROR_ABORTED))
      worst = i;
  }
  if (worst >= 0) {
    const Error &e = joined[static_cast<size_t>(worst)].error;
    fail(e.status(), "device %d (rank %d): %s", worst, env.rank * ndev + worst, e.what());
  }
  for (int i = 0; i < ndev; ++i)
    comms[i] = reinterpret_cast<hpuComm_t>(comm_registry().add(std::move(joined[static_cast<size_t>(i)].comm)));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommDestroy(hpuComm_t comm) {
  HPU_API_BEGIN
  if (comm == nullptr) return HPU_SUCCESS;
  comm_from_handle(comm)->wait_idle();
  comm_registry().remove(comm);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommAbort(hpuComm_t comm) {
  HPU_API_BEGIN
  if (comm == nullptr) return HPU_SUCCESS;
  auto c = comm_from_handle(comm);
  c->abort(strf("hpuCommAbort was called on rank %d", c->rank()));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommGetAsyncError(hpuComm_t comm, hpuStatus_t *error) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  HPU_CHECK_ARG(error != nullptr, "error is NULL");
  std::string message;
  hpuStatus_t s = c->error(&message);
  if (s != HPU_SUCCESS) api::set_error(__func__, s, message);
  *error = s;
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommCount(hpuComm_t comm, int *count) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  HPU_CHECK_ARG(count != nullptr, "count is NULL");
  *count = c->size();
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommUserRank(hpuComm_t comm, int *rank) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  HPU_CHECK_ARG(rank != nullptr, "rank is NULL");
  *rank = c->rank();
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommSetTimeout(hpuComm_t comm, double seconds) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  HPU_CHECK_ARG(std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxTimeout,
                "seconds %g is out of range (0 for HPU_COMM_TIMEOUT, or up to %g)", seconds, kMaxTimeout);
  c->set_timeout(seconds);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCommGetTimeout(hpuComm_t comm, double *seconds) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  HPU_CHECK_ARG(seconds != nullptr, "seconds is NULL");
  *seconds = c->timeout();
  HPU_API_END
}

HPU_API hpuStatus_t hpuAllreduce(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                 hpuDataType_t dtype, hpuRedOp_t op) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_op(op, dtype);
  size_t b = bytes_of(count, dtype, 1, "count");
  check_buffer(send, b, "send", *c);
  check_buffer(recv, b, "recv", *c);
  check_overlap(send, b, "send", recv, b, "recv", send, "send == recv");
  submit(c, stream, header(CollKind::allreduce, dtype, count, -1, op), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuBroadcast(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                 hpuDataType_t dtype, int root) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_root(root, *c, "root");
  size_t b = bytes_of(count, dtype, 1, "count");
  if (c->rank() == root) {
    check_buffer(send, b, "send", *c);
    check_overlap(send, b, "send", recv, b, "recv", send, "send == recv");
  }
  check_buffer(recv, b, "recv", *c);
  submit(c, stream, header(CollKind::broadcast, dtype, count, root, HPU_SUM), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuReduce(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                              hpuDataType_t dtype, hpuRedOp_t op, int root) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_op(op, dtype);
  check_root(root, *c, "root");
  size_t b = bytes_of(count, dtype, 1, "count");
  check_buffer(send, b, "send", *c);
  if (c->rank() == root) {
    check_buffer(recv, b, "recv", *c);
    check_overlap(send, b, "send", recv, b, "recv", send, "send == recv");
  }
  submit(c, stream, header(CollKind::reduce, dtype, count, root, op), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuAllgather(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t sendcount,
                                 hpuDataType_t dtype) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  size_t sb = bytes_of(sendcount, dtype, 1, "sendcount");
  size_t rb = bytes_of(sendcount, dtype, static_cast<size_t>(c->size()), "sendcount");
  check_buffer(send, sb, "send", *c);
  check_buffer(recv, rb, "recv", *c);
  check_overlap(recv, rb, "recv", send, sb, "send", static_cast<const char *>(recv) + sb * static_cast<size_t>(c->rank()),
                "send == recv + rank * sendcount");
  submit(c, stream, header(CollKind::allgather, dtype, sendcount, -1, HPU_SUM), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuReduceScatter(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t recvcount,
                                     hpuDataType_t dtype, hpuRedOp_t op) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_op(op, dtype);
  size_t rb = bytes_of(recvcount, dtype, 1, "recvcount");
  size_t sb = bytes_of(recvcount, dtype, static_cast<size_t>(c->size()), "recvcount");
  check_buffer(send, sb, "send", *c);
  check_buffer(recv, rb, "recv", *c);
  check_overlap(send, sb, "send", recv, rb, "recv", static_cast<const char *>(send) + rb * static_cast<size_t>(c->rank()),
                "recv == send + rank * recvcount");
  submit(c, stream, header(CollKind::reducescatter, dtype, recvcount, -1, op), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuAlltoall(hpuStream_t stream, hpuComm_t comm, const void *send, void *recv, size_t count,
                                hpuDataType_t dtype) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  size_t b = bytes_of(count, dtype, static_cast<size_t>(c->size()), "count");
  check_buffer(send, b, "send", *c);
  check_buffer(recv, b, "recv", *c);
  check_overlap(send, b, "send", recv, b, "recv", send, "send == recv");
  submit(c, stream, header(CollKind::alltoall, dtype, count, -1, HPU_SUM), send, recv);
  HPU_API_END
}

HPU_API hpuStatus_t hpuBarrier(hpuStream_t stream, hpuComm_t comm) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  submit(c, stream, header(CollKind::barrier, HPU_BOOL, 0, -1, HPU_SUM), nullptr, nullptr);
  HPU_API_END
}

HPU_API hpuStatus_t hpuSend(hpuStream_t stream, hpuComm_t comm, const void *send, size_t count, hpuDataType_t dtype,
                            int peer) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_root(peer, *c, "peer");
  check_buffer(send, bytes_of(count, dtype, 1, "count"), "send", *c);
  issue_or_record_p2p(c, stream_of(stream, *c), P2POp{true, const_cast<void *>(send), count, dtype, peer});
  HPU_API_END
}

HPU_API hpuStatus_t hpuRecv(hpuStream_t stream, hpuComm_t comm, void *recv, size_t count, hpuDataType_t dtype,
                            int peer) {
  HPU_API_BEGIN
  auto c = comm_from_handle(comm);
  check_dtype(dtype);
  check_root(peer, *c, "peer");
  check_buffer(recv, bytes_of(count, dtype, 1, "count"), "recv", *c);
  issue_or_record_p2p(c, stream_of(stream, *c), P2POp{false, recv, count, dtype, peer});
  HPU_API_END
}

HPU_API hpuStatus_t hpuGroupStart(void) {
  HPU_API_BEGIN
  group_start();
  HPU_API_END
}

HPU_API hpuStatus_t hpuGroupEnd(void) {
  HPU_API_BEGIN
  group_end();
  HPU_API_END
}

}  // extern "C"
