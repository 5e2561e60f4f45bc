// THE VERBS TEST ADAPTER (HPU_IB_ADAPTER=test): an in-memory stand-in for an
// RDMA adapter that fills the same VerbsApi table as libibverbs.so.1, so that
// the verbs transport can be tested on machines without RDMA hardware or
// kernel support. It is not RDMA: data moves by memcpy through shared memory,
// and nothing measured over it says anything about RDMA performance.
//
// What it models, as the real verbs do:
//   - one device "hpu_test0" with one port (active unless a port_down fault);
//   - protection domains; memory regions with lkey/rkey, access flags and
//     bounds checks (a bad lkey is a local protection error, a bad rkey or
//     range a remote access error that moves the responder's QP to error);
//   - RC queue pairs with the RESET -> INIT -> RTR -> RTS state machine (the
//     attribute masks each transition requires; other transitions EINVAL),
//     send and receive queue depths, inline data, ERR with flushed requests;
//   - completion queues; SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM;
//     a message with no posted receive waits (infinite RNR retry);
//   - the fabric: each QP owns an inbound ring in POSIX shared memory, named
//     by its GID (process id + random token) and QP number; at RTR the peer
//     maps it and unlinks the name. The sender copies its work requests into
//     the ring; the receiving process applies them into its own registered
//     memory when it polls its CQ, after checking rkey and bounds, and
//     publishes how far it got, which gives the sender its completions.
//     Works between threads (two contexts) and between processes alike.
//   - a peer process that dies, or a peer QP in the error state: outstanding
//     sends complete with IBV_WC_RETRY_EXC_ERR once the retries (the QP's
//     timeout and retry count) would have run out.
// Faults (HPU_IB_TEST_FAULT=kind[:n], firing on this process's (n+1)-th
// posted send; n defaults to 0): retry_exceeded, remote_access (the write
// carries a bad rkey and is rejected by the receiver), qp_error (the QP goes to
// the error state), port_down (the port goes down; sends fail with retry
// exceeded and query_port reports IBV_PORT_DOWN).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "comm/transports/verbs_api.hpp"
#include "core/error.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kWireRing = 4 << 20;
constexpr uint32_t kMaxWr = 4096;
constexpr uint32_t kMaxInline = 256;
constexpr uint32_t kMaxSge = 4;

struct Wire {
  std::atomic<uint64_t> head{0};  // bytes written by the sender
  std::atomic<uint64_t> tail{0};  // bytes consumed by the receiver
  std::atomic<uint64_t> done_seq{0};  // the last request the receiver processed
  std::atomic<uint64_t> nak_seq{0};   // a request the receiver rejected (0: none)
  std::atomic<uint32_t> nak_status{0};
  std::atomic<uint32_t> receiver_error{0};  // the receiving QP is in the error state
  uint8_t data[kWireRing];
};

struct Entry {
  uint64_t seq;
  uint32_t opcode;  // ibv_wr_opcode + 1; 0: padding to the end of the ring
  uint32_t imm;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t len;
};
size_t entry_bytes(size_t len) { return (sizeof(Entry) + len + 7) & ~size_t(7); }

enum class Fault { none, retry_exceeded, remote_access, qp_error, port_down };

struct TCq;
struct TQp;
struct TPd {
  ibv_pd pd;
  int users = 0;  // MRs and QPs
};
struct TMr {
  ibv_mr mr;
  int access;
};
struct TCq {
  ibv_cq cq;
  int depth;
  std::deque<ibv_wc> wcs;
  std::vector<TQp *> qps;
};
struct Pending {
  uint64_t wr_id, seq;
  bool signaled;
  ibv_wc_opcode opcode;
  uint32_t len;
};
struct RecvWr {
  uint64_t wr_id;
  std::vector<ibv_sge> sge;
};
struct TQp {
  ibv_qp qp;
  ibv_qp_cap cap;
  TCq *scq, *rcq;
  std::string in_name;
  Wire *in = nullptr;   // ours: the peer writes, we apply
  Wire *out = nullptr;  // the peer's: we write
  int peer_pidfd = -1;
  uint64_t next_seq = 1;
  std::deque<Pending> sends;
  std::deque<RecvWr> recvs;
  // Retries against an unresponsive peer end after 4.096 us * 2^timeout per try,
  // retry_cnt + 1 tries (set at RTS), as on a real HCA.
  std::chrono::steady_clock::duration retry_time = std::chrono::milliseconds(500);
  std::chrono::steady_clock::time_point unanswered_since{};
};

struct Adapter {
  std::mutex mu;
  ibv_device device{};
  ibv_device *list[2] = {&device, nullptr};
  uint32_t token = 0;
  uint32_t next_key = 0x1000, next_qpn = 0x100;
  std::map<uint32_t, TMr *> mrs;  // by key (lkey == rkey)
  bool port_down = false;
  Fault fault = Fault::none;
  long fault_after = 0, posted = 0;

  Adapter() {
    std::strcpy(device.name, "hpu_test0");
    std::strcpy(device.dev_name, "uverbs-test0");
    device.node_type = IBV_NODE_CA;
    device.transport_type = IBV_TRANSPORT_IB;
    if (getrandom(&token, sizeof token, 0) != sizeof token) token = static_cast<uint32_t>(getpid()) * 2654435761u;
    if (const char *f = std::getenv("HPU_IB_TEST_FAULT")) {
      std::string s(f);
      size_t colon = s.find(':');
      if (colon != std::string::npos) fault_after = std::atol(s.c_str() + colon + 1), s.resize(colon);
      fault = s == "retry_exceeded" ? Fault::retry_exceeded
              : s == "remote_access" ? Fault::remote_access
              : s == "qp_error"      ? Fault::qp_error
              : s == "port_down"     ? Fault::port_down
                                     : Fault::none;
    }
  }
};

Adapter &adapter() {
  static Adapter *a = new Adapter();  // lives as long as the process (objects may outlive static destruction)
  return *a;
}

std::string wire_name(uint32_t pid, uint32_t token, uint32_t qpn) {
  return strf("/hpu-ibtest-%08x-%u-%u", token, pid, qpn);
}

void make_gid(ibv_gid *gid) {
  std::memset(gid, 0, sizeof *gid);
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  uint32_t pid = static_cast<uint32_t>(getpid());
  std::memcpy(gid->raw + 8, &pid, 4);
  std::memcpy(gid->raw + 12, &adapter().token, 4);
}

Wire *map_wire(const std::string &name, bool create) {
  int fd = shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, sizeof(Wire)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  void *p = mmap(nullptr, sizeof(Wire), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  return create ? new (p) Wire() : static_cast<Wire *>(p);
}

TQp *tqp(ibv_qp *q) { return reinterpret_cast<TQp *>(q); }
TCq *tcq(ibv_cq *c) { return reinterpret_cast<TCq *>(c); }

void push_wc(TCq *cq, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode op, uint32_t len, uint32_t qpn,
             const uint32_t *imm = nullptr) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = qpn;
  if (imm) {
    wc.imm_data = *imm;
    wc.wc_flags = IBV_WC_WITH_IMM;
  }
  cq->wcs.push_back(wc);
}

// The QP goes to the error state: what is queued completes as flushed.
void to_error(TQp *q) {
  q->qp.state = IBV_QPS_ERR;
  for (auto &p : q->sends) push_wc(q->scq, p.wr_id, IBV_WC_WR_FLUSH_ERR, p.opcode, 0, q->qp.qp_num);
  q->sends.clear();
  for (auto &r : q->recvs) push_wc(q->rcq, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, q->qp.qp_num);
  q->recvs.clear();
  if (q->in) q->in->receiver_error.store(1, std::memory_order_release);
}

// The front send fails with `status`; the QP goes to error.
void fail_front(TQp *q, ibv_wc_status status) {
  Pending p = q->sends.front();
  q->sends.pop_front();
  push_wc(q->scq, p.wr_id, status, p.opcode, 0, q->qp.qp_num);
  to_error(q);
}

// A local buffer described by sges, checked against the lkeys.
bool local_range(const ibv_sge &s, bool write) {
  auto &a = adapter();
  auto it = a.mrs.find(s.lkey);
  if (it == a.mrs.end()) return false;
  const ibv_mr &mr = it->second->mr;
  if (write && !(it->second->access & IBV_ACCESS_LOCAL_WRITE)) return false;
  uintptr_t b = static_cast<uintptr_t>(s.addr), base = reinterpret_cast<uintptr_t>(mr.addr);
  return b >= base && s.length <= mr.length && b - base <= mr.length - s.length;
}

// Applies what the peer wrote into our ring (the responder's side).
void drain(TQp *q) {
  if (!q->in || (q->qp.state != IBV_QPS_RTR && q->qp.state != IBV_QPS_RTS)) return;
  Wire *w = q->in;
  auto &a = adapter();
  uint64_t tail = w->tail.load(std::memory_order_relaxed), head = w->head.load(std::memory_order_acquire);
  while (tail < head) {
    size_t pos = tail % kWireRing;
    Entry e;
    if (kWireRing - pos < sizeof(Entry)) {
      tail += kWireRing - pos;
      continue;
    }
    std::memcpy(&e, w->data + pos, sizeof e);
    if (e.opcode == 0) {
      tail += kWireRing - pos;
      continue;
    }
    const uint8_t *payload = w->data + pos + sizeof(Entry);
    auto op = static_cast<ibv_wr_opcode>(e.opcode - 1);
    bool consumes = op != IBV_WR_RDMA_WRITE;
    if (consumes && q->recvs.empty()) break;  // receiver not ready: the sender retries (RNR)
    ibv_wc_status nak = IBV_WC_SUCCESS;
    if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
      auto it = a.mrs.find(e.rkey);
      const TMr *mr = it == a.mrs.end() ? nullptr : it->second;
      uintptr_t base = mr ? reinterpret_cast<uintptr_t>(mr->mr.addr) : 0;
      if (!mr || !(mr->access & IBV_ACCESS_REMOTE_WRITE) || mr->mr.pd != q->qp.pd || e.remote_addr < base ||
          e.len > mr->mr.length || e.remote_addr - base > mr->mr.length - e.len)
        nak = IBV_WC_REM_ACCESS_ERR;
      else
        std::memcpy(reinterpret_cast<void *>(e.remote_addr), payload, e.len);
    }
    if (nak == IBV_WC_SUCCESS && consumes) {
      RecvWr r = std::move(q->recvs.front());
      q->recvs.pop_front();
      bool with_imm = op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_IMM;
      ibv_wc_opcode wop = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
      ibv_wc_status st = IBV_WC_SUCCESS;
      if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM) {
        size_t room = 0;
        for (auto &s : r.sge) room += s.length;
        bool ok = room >= e.len;
        for (auto &s : r.sge) ok = ok && local_range(s, true);
        if (!ok) {
          st = room < e.len ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
          nak = IBV_WC_REM_INV_REQ_ERR;
        } else {
          size_t off = 0;
          for (auto &s : r.sge) {
            size_t n = std::min<size_t>(s.length, e.len - off);
            std::memcpy(reinterpret_cast<void *>(s.addr), payload + off, n);
            off += n;
          }
        }
      }
      push_wc(q->rcq, r.wr_id, st, wop, st == IBV_WC_SUCCESS ? e.len : 0, q->qp.qp_num, with_imm ? &e.imm : nullptr);
    }
    tail += entry_bytes(e.len);
    w->tail.store(tail, std::memory_order_release);
    if (nak != IBV_WC_SUCCESS) {
      w->nak_status.store(nak, std::memory_order_relaxed);
      w->nak_seq.store(e.seq, std::memory_order_release);
      w->done_seq.store(e.seq, std::memory_order_release);
      to_error(q);  // the responder's QP goes to error too (IBV_EVENT_QP_ACCESS_ERR)
      return;
    }
    w->done_seq.store(e.seq, std::memory_order_release);
  }
}

bool peer_dead(TQp *q) {
  if (q->peer_pidfd < 0) return false;
  pollfd p{q->peer_pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Completes our sends the peer has processed (the requester's side).
void reap(TQp *q) {
  if (!q->out || q->sends.empty()) return;
  uint64_t done = q->out->done_seq.load(std::memory_order_acquire);
  uint64_t nak = q->out->nak_seq.load(std::memory_order_acquire);
  while (!q->sends.empty() && q->sends.front().seq <= done) {
    if (q->sends.front().seq == nak) {
      fail_front(q, static_cast<ibv_wc_status>(q->out->nak_status.load()));
      return;
    }
    Pending p = q->sends.front();
    q->sends.pop_front();
    if (p.signaled) push_wc(q->scq, p.wr_id, IBV_WC_SUCCESS, p.opcode, p.len, q->qp.qp_num);
  }
  if (q->sends.empty() || !(q->out->receiver_error.load(std::memory_order_acquire) || peer_dead(q))) {
    q->unanswered_since = {};
    return;
  }
  auto now = std::chrono::steady_clock::now();  // no responder answers: the retries run out
  if (q->unanswered_since == std::chrono::steady_clock::time_point{}) q->unanswered_since = now;
  if (now - q->unanswered_since >= q->retry_time) fail_front(q, IBV_WC_RETRY_EXC_ERR);
}

// --- the table -------------------------------------------------------------

ibv_device **t_get_device_list(int *n) {
  if (n) *n = 1;
  return adapter().list;
}
void t_free_device_list(ibv_device **) {}
const char *t_get_device_name(ibv_device *d) { return d->name; }

ibv_context *t_open_device(ibv_device *d) {
  if (d != &adapter().device) {
    errno = ENODEV;
    return nullptr;
  }
  auto *c = new ibv_context{};
  c->device = d;
  c->cmd_fd = c->async_fd = -1;
  return c;
}
int t_close_device(ibv_context *c) {
  delete c;
  return 0;
}

int t_query_device(ibv_context *, ibv_device_attr *attr) {
  std::memset(attr, 0, sizeof *attr);
  std::strcpy(attr->fw_ver, "test-adapter");
  attr->phys_port_cnt = 1;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = kMaxWr;
  attr->max_sge = kMaxSge;
  attr->max_cqe = 1 << 16;
  attr->max_mr_size = UINT64_MAX;
  return 0;
}

int t_query_port(ibv_context *, uint8_t port, ibv_port_attr *attr) {
  if (port != 1) return EINVAL;
  std::lock_guard<std::mutex> lock(adapter().mu);
  std::memset(attr, 0, sizeof *attr);
  attr->state = adapter().port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->max_mtu = attr->active_mtu = IBV_MTU_4096;
  attr->lid = static_cast<uint16_t>(getpid() & 0xffff);
  attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
  attr->gid_tbl_len = 1;
  return 0;
}

int t_query_gid(ibv_context *, uint8_t port, int index, ibv_gid *gid) {
  if (port != 1 || index != 0) return EINVAL;
  make_gid(gid);
  return 0;
}

ibv_pd *t_alloc_pd(ibv_context *c) {
  auto *p = new TPd{};
  p->pd.context = c;
  return &p->pd;
}
int t_dealloc_pd(ibv_pd *pd) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  auto *p = reinterpret_cast<TPd *>(pd);
  if (p->users) return EBUSY;
  delete p;
  return 0;
}

ibv_mr *t_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
  bool remote = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  if (!pd || (!addr && length) || (remote && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;  // remote write needs local write, as in the real verbs
    return nullptr;
  }
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  auto *m = new TMr{};
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = a.next_key++;
  m->access = access;
  a.mrs[m->mr.lkey] = m;
  reinterpret_cast<TPd *>(pd)->users++;
  return &m->mr;
}
int t_dereg_mr(ibv_mr *mr) {
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.mrs.find(mr->lkey);
  if (it == a.mrs.end() || &it->second->mr != mr) return EINVAL;
  reinterpret_cast<TPd *>(mr->pd)->users--;
  delete it->second;
  a.mrs.erase(it);
  return 0;
}

ibv_cq *t_create_cq(ibv_context *c, int cqe, void *cq_context, ibv_comp_channel *, int) {
  if (cqe < 1 || cqe > (1 << 16)) {
    errno = EINVAL;
    return nullptr;
  }
  auto *q = new TCq{};
  q->cq.context = c;
  q->cq.cq_context = cq_context;
  q->cq.cqe = cqe;
  q->depth = cqe;
  return &q->cq;
}
int t_destroy_cq(ibv_cq *cq) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  if (!tcq(cq)->qps.empty()) return EBUSY;
  delete tcq(cq);
  return 0;
}

ibv_qp *t_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) {
  if (!pd || !attr || attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq || attr->srq ||
      attr->cap.max_send_wr > kMaxWr || attr->cap.max_recv_wr > kMaxWr || attr->cap.max_send_sge > kMaxSge ||
      attr->cap.max_recv_sge > kMaxSge || attr->cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  auto *q = new TQp{};
  q->qp.context = pd->context;
  q->qp.qp_context = attr->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_num = a.next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->cap = attr->cap;
  q->scq = tcq(attr->send_cq);
  q->rcq = tcq(attr->recv_cq);
  q->in_name = wire_name(static_cast<uint32_t>(getpid()), a.token, q->qp.qp_num);
  q->in = map_wire(q->in_name, true);
  if (!q->in) {
    int e = errno;
    delete q;
    errno = e;
    return nullptr;
  }
  q->scq->qps.push_back(q);
  if (q->rcq != q->scq) q->rcq->qps.push_back(q);
  reinterpret_cast<TPd *>(pd)->users++;
  return &q->qp;
}

int t_destroy_qp(ibv_qp *qp) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  TQp *q = tqp(qp);
  for (TCq *c : {q->scq, q->rcq}) {
    auto &v = c->qps;
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] == q) v.erase(v.begin() + static_cast<long>(i--));
  }
  if (q->in) {
    q->in->receiver_error.store(1);
    munmap(q->in, sizeof(Wire));
    shm_unlink(q->in_name.c_str());  // if no peer took it
  }
  if (q->out) munmap(q->out, sizeof(Wire));
  if (q->peer_pidfd >= 0) close(q->peer_pidfd);
  reinterpret_cast<TPd *>(qp->pd)->users--;
  delete q;
  return 0;
}

bool has(int mask, int required) { return (mask & required) == required; }

int t_modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  TQp *q = tqp(qp);
  if (!(mask & IBV_QP_STATE)) return q->qp.state == IBV_QPS_RTS ? 0 : EINVAL;
  ibv_qp_state from = q->qp.state, to = attr->qp_state;
  if (to == IBV_QPS_ERR) {
    to_error(q);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    q->sends.clear();
    q->recvs.clear();
    q->qp.state = IBV_QPS_RESET;
    return 0;
  }
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num != 1) return EINVAL;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                       IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    const ibv_gid &g = attr->ah_attr.grh.dgid;
    if (!attr->ah_attr.is_global || g.raw[0] != 0xfe || g.raw[1] != 0x80) return EINVAL;  // the fabric routes by GID
    uint32_t pid, token;
    std::memcpy(&pid, g.raw + 8, 4);
    std::memcpy(&token, g.raw + 12, 4);
    std::string name = wire_name(pid, token, attr->dest_qp_num);
    Wire *out = map_wire(name, false);
    if (!out) return EINVAL;  // no such QP on the fabric
    shm_unlink(name.c_str());  // RC is one to one: no one else maps it
    if (q->out) munmap(q->out, sizeof(Wire));
    q->out = out;
    if (q->peer_pidfd >= 0) close(q->peer_pidfd);
    q->peer_pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  } else if ((from == IBV_QPS_RTR || from == IBV_QPS_RTS) && to == IBV_QPS_RTS) {
    if (from == IBV_QPS_RTR &&
        !has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
    if (mask & IBV_QP_TIMEOUT) {
      // 0 is "wait forever" on hardware; here it is capped at 10 s.
      double per_try = attr->timeout ? 4.096e-6 * static_cast<double>(1ull << std::min<int>(attr->timeout, 31)) : 10.0;
      double total = std::min(10.0, per_try * ((mask & IBV_QP_RETRY_CNT ? attr->retry_cnt : 7) + 1));
      q->retry_time = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(total));
    }
  } else if (!(from == IBV_QPS_INIT && to == IBV_QPS_INIT)) {
    return EINVAL;  // RESET->RTR, INIT->RTS, ERR->RTS and the like
  }
  q->qp.state = to;
  return 0;
}

int t_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  TQp *q = tqp(qp);
  for (; wr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_RESET || wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_recv_sge ||
        q->recvs.size() >= q->cap.max_recv_wr) {
      *bad = wr;
      return q->qp.state == IBV_QPS_RESET || wr->num_sge < 0 ? EINVAL : ENOMEM;
    }
    if (q->qp.state == IBV_QPS_ERR) {
      push_wc(q->rcq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, q->qp.qp_num);
      continue;
    }
    q->recvs.push_back({wr->wr_id, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
  }
  return 0;
}

int t_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  TQp *q = tqp(qp);
  for (; wr; wr = wr->next) {
    auto op = wr->opcode;
    bool known = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE ||
                 op == IBV_WR_RDMA_WRITE_WITH_IMM;
    if ((q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) || !known || wr->num_sge < 0 ||
        static_cast<uint32_t>(wr->num_sge) > q->cap.max_send_sge) {
      *bad = wr;
      return EINVAL;
    }
    if (q->sends.size() >= q->cap.max_send_wr) {
      *bad = wr;
      return ENOMEM;
    }
    ibv_wc_opcode wop = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; ++i) len += wr->sg_list[i].length;
    bool is_inline = wr->send_flags & IBV_SEND_INLINE;
    if (is_inline && len > q->cap.max_inline_data) {
      *bad = wr;
      return EINVAL;
    }
    Pending p{wr->wr_id, q->next_seq++, (wr->send_flags & IBV_SEND_SIGNALED) != 0, wop, static_cast<uint32_t>(len)};
    if (q->qp.state == IBV_QPS_ERR) {
      push_wc(q->scq, p.wr_id, IBV_WC_WR_FLUSH_ERR, wop, 0, q->qp.qp_num);
      continue;
    }
    q->sends.push_back(p);
    Fault fault = a.fault != Fault::none && a.posted++ == a.fault_after ? a.fault : Fault::none;
    if (fault == Fault::port_down) a.port_down = true;
    if (a.port_down || fault == Fault::retry_exceeded) {
      fail_front(q, IBV_WC_RETRY_EXC_ERR);
      continue;
    }
    if (fault == Fault::qp_error) {
      to_error(q);
      continue;
    }
    bool local_ok = true;
    for (int i = 0; i < wr->num_sge && !is_inline; ++i) local_ok = local_ok && local_range(wr->sg_list[i], false);
    if (!local_ok) {
      q->sends.pop_back();
      q->sends.push_front(p);
      fail_front(q, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    // Into the peer's ring; it is as deep as the queue allows (else the QP errs, as a full link would).
    Wire *w = q->out;
    size_t rec = entry_bytes(len);
    uint64_t head = w->head.load(std::memory_order_relaxed), tail = w->tail.load(std::memory_order_acquire);
    size_t pos = head % kWireRing, waste = kWireRing - pos < rec ? kWireRing - pos : 0;
    if (rec > kWireRing / 2 || kWireRing - (head - tail) < waste + rec) {
      q->sends.pop_back();
      --q->next_seq;
      *bad = wr;
      return ENOMEM;
    }
    if (waste >= sizeof(Entry)) {
      Entry pad{};
      std::memcpy(w->data + pos, &pad, sizeof pad);
    }
    head += waste;
    pos = head % kWireRing;
    Entry e{p.seq, static_cast<uint32_t>(op) + 1, wr->imm_data, wr->wr.rdma.remote_addr, wr->wr.rdma.rkey,
            static_cast<uint32_t>(len)};
    if (fault == Fault::remote_access) e.rkey ^= 0x80000000u;
    std::memcpy(w->data + pos, &e, sizeof e);
    size_t off = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      std::memcpy(w->data + pos + sizeof e + off, reinterpret_cast<const void *>(wr->sg_list[i].addr),
                  wr->sg_list[i].length);
      off += wr->sg_list[i].length;
    }
    w->head.store(head + rec, std::memory_order_release);
  }
  return 0;
}

int t_poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  TCq *c = tcq(cq);
  for (TQp *q : c->qps) {
    if (q->rcq == c) drain(q);
    if (q->scq == c) reap(q);
  }
  int got = 0;
  while (got < n && !c->wcs.empty()) {
    wc[got++] = c->wcs.front();
    c->wcs.pop_front();
  }
  return got;
}

const char *t_wc_status_str(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_INV_REQ_ERR: return "invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "unknown";
  }
}

const VerbsApi kTestApi = {
    "test adapter",   t_get_device_list, t_free_device_list, t_get_device_name, t_open_device, t_close_device,
    t_query_device,   t_query_port,      t_query_gid,        t_alloc_pd,        t_dealloc_pd,  t_reg_mr,
    t_dereg_mr,       t_create_cq,       t_destroy_cq,       t_create_qp,       t_modify_qp,   t_destroy_qp,
    t_post_send,      t_post_recv,       t_poll_cq,          t_wc_status_str,
};

}  // namespace

const VerbsApi *verbs_test_api() { return &kTestApi; }

}  // namespace hpu::comm
