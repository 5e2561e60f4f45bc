// A FAKE libibverbs for tests, not RDMA: it measures nothing about RDMA.
//
// Built by the test suite as its own libibverbs.so.1 (tests/support/
// fake_ibverbs), never part of libhpu. libhpu loads it through the very
// dlopen path real rdma-core takes: a test names it in HPU_IB_LIBRARY (or puts
// its folder on LD_LIBRARY_PATH), and libhpu's verbs table (src/comm/
// transports/verbs/api.cpp) dlsyms the same entry points from it as from
// rdma-core, under the same symbol versions (fake_ibverbs.map). The data-path
// calls that <infiniband/verbs.h> inlines (ibv_post_send, ibv_post_recv,
// ibv_poll_cq) reach it through the context's ops, filled here as rdma-core's
// providers fill them. It stands in for an RDMA adapter so that the verbs
// transport can be tested on machines without RDMA hardware or kernel
// support: data moves by memcpy through shared memory.
//
// What it models, as the real verbs do:
//   - two devices: hpu_test0 with two InfiniBand ports, hpu_test1 with one
//     Ethernet (RoCE) port whose GID table is laid out as a RoCE NIC's is
//     (link-local, IPv4-mapped and IPv6 addresses, each as a RoCE v1 and a
//     RoCE v2 entry; _ibv_query_gid_ex gives the types);
//   - protection domains; memory regions with lkey/rkey, access flags and
//     bounds checks (a bad lkey is a local protection error, a bad rkey or
//     range a remote access error that moves the responder's QP to error);
//   - RC queue pairs with the RESET -> INIT -> RTR -> RTS state machine (the
//     attribute masks each transition requires; other transitions EINVAL; on
//     an Ethernet port the address vector needs the GRH and a valid
//     sgid_index), send and receive queue depths, inline data, ERR with
//     flushed requests;
//   - completion queues; SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM;
//     a message with no posted receive waits (infinite RNR retry);
//   - asynchronous events on each context's async_fd (an eventfd: readable
//     while events wait; ibv_get_async_event blocks unless the descriptor is
//     O_NONBLOCK, then fails with EAGAIN): IBV_EVENT_PORT_ERR, DEVICE_FATAL,
//     QP_FATAL, QP_ACCESS_ERR;
//   - the fabric: every GID of this process embeds a random 24-bit node id
//     (10.x.y.z in the IPv4-mapped ones); each QP owns an inbound ring in POSIX
//     shared memory named by node id and QP number; at RTR the peer maps it
//     and unlinks the name. The sender copies its work requests into the ring;
//     the receiving process applies them into its own registered memory when
//     it polls its CQ, after checking rkey and bounds, and publishes how far it
//     got, which gives the sender its completions. Works between threads (two
//     contexts) and between processes alike. Two ends whose GIDs differ in type
//     (RoCE v1 against v2) never hear each other, as on a real network.
//   - a peer process that dies, a peer QP in the error state, or a peer of
//     another GID type: outstanding sends complete with IBV_WC_RETRY_EXC_ERR
//     once the retries (the QP's timeout and retry count) would have run out.
// Faults: HPU_FAKE_IBV_FAULT=kind[:n], this fake's own variable (not a libhpu
// setting), read at each ibv_get_device_list (libhpu lists the devices when it
// makes a communicator); a value other than the one in force fires on this
// process's (n+1)-th posted send from then (n defaults to 0): retry_exceeded,
// remote_access (the write carries a bad rkey and is rejected by the
// receiver), qp_error (the QP goes to the error state, IBV_EVENT_QP_FATAL),
// port_down (the sending QP's port goes down: IBV_EVENT_PORT_ERR, and its
// sends fail with retry exceeded), device_fatal (IBV_EVENT_DEVICE_FATAL; every
// QP of the device goes to error). An unknown kind aborts the process with a
// message on stderr: a mistyped test must not pass without its fault.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

// <infiniband/verbs.h> wraps these entry points in inline functions; this file
// defines the exported functions themselves.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

constexpr size_t kWireRing = 4 << 20;
constexpr uint32_t kMaxWr = 4096;
constexpr uint32_t kMaxInline = 256;
constexpr uint32_t kMaxSge = 4;
constexpr int kRoceGids = 6;

struct Wire {
  std::atomic<uint64_t> head{0};  // bytes written by the sender
  std::atomic<uint64_t> tail{0};  // bytes consumed by the receiver
  std::atomic<uint64_t> done_seq{0};  // the last request the receiver processed
  std::atomic<uint64_t> nak_seq{0};   // a request the receiver rejected (0: none)
  std::atomic<uint32_t> nak_status{0};
  std::atomic<uint32_t> receiver_error{0};  // the receiving QP is in the error state
  std::atomic<uint32_t> receiver_gid_type{0};  // 1 + the GID type the receiver's QP uses (0: not at RTR yet)
  int32_t owner_pid = 0;
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

enum class Fault { none, retry_exceeded, remote_access, qp_error, port_down, device_fatal };

struct TCq;
struct TQp;
struct TDevice;
struct TContext {
  ibv_context ctx;  // first: the ibv_context* handed out points here
  TDevice *dev;
  std::deque<ibv_async_event> events;
};
struct TDevice {
  ibv_device device{};
  int ports = 1;
  bool ethernet = false;
  bool port_down[3] = {false, false, false};  // by port number
  bool fatal = false;
  std::vector<TContext *> contexts;
};
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
  int port = 0;           // from INIT
  uint32_t gid_type = 0;  // of the sgid used at RTR
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
  TDevice devices[2];
  ibv_device *list[3] = {&devices[0].device, &devices[1].device, nullptr};
  uint32_t node = 0;  // 24 bits, in every GID
  uint32_t next_key = 0x1000, next_qpn = 0x100;
  std::map<uint32_t, TMr *> mrs;  // by key (lkey == rkey)
  std::string fault_spec;
  Fault fault = Fault::none;
  long fault_after = 0, posted = 0;

  Adapter() {
    const char *names[2] = {"hpu_test0", "hpu_test1"};
    for (int d = 0; d < 2; ++d) {
      std::strcpy(devices[d].device.name, names[d]);
      snprintf(devices[d].device.dev_name, sizeof devices[d].device.dev_name, "uverbs-test%d", d);
      devices[d].device.node_type = IBV_NODE_CA;
      devices[d].device.transport_type = IBV_TRANSPORT_IB;
    }
    devices[0].ports = 2;
    devices[1].ethernet = true;
    new_node();
  }

  void new_node() {
    node = 0;
    while (node == 0) {
      if (getrandom(&node, sizeof node, 0) != sizeof node) node = static_cast<uint32_t>(getpid()) * 2654435761u;
      node &= 0xffffff;
    }
  }
};

Adapter &adapter() {
  static Adapter *a = [] {
    auto *made = new Adapter();  // lives as long as the process (objects may outlive static destruction)
    // A forked child is another node of the fabric: the QPs it makes must not
    // take the names of its parent's.
    pthread_atfork(nullptr, nullptr, [] { adapter().new_node(); });
    return made;
  }();
  return *a;
}

TDevice *device_of(ibv_context *c) { return reinterpret_cast<TContext *>(c)->dev; }

std::string wire_name(uint32_t node, uint32_t qpn) {
  char name[64];
  snprintf(name, sizeof name, "/hpu-fake-ibv-%06x-%u", node, qpn);
  return name;
}

// GIDs. An InfiniBand port has one: fe80::<'h','p','u',0,0,node>. The RoCE
// port's table, as a RoCE NIC lays it out: 0/1 link-local fe80::<node> v1/v2,
// 2/3 ::ffff:10.x.y.z v1/v2, 4/5 fd68:7075::<node> (IPv6) v1/v2.
void make_gid(const TDevice &d, int index, ibv_gid *gid, uint32_t *type) {
  uint32_t node = adapter().node;
  std::memset(gid, 0, sizeof *gid);
  uint8_t n[3] = {static_cast<uint8_t>(node >> 16), static_cast<uint8_t>(node >> 8), static_cast<uint8_t>(node)};
  if (!d.ethernet) {
    gid->raw[0] = 0xfe, gid->raw[1] = 0x80;
    gid->raw[8] = 'h', gid->raw[9] = 'p', gid->raw[10] = 'u';
    std::memcpy(gid->raw + 13, n, 3);
    *type = IBV_GID_TYPE_IB;
    return;
  }
  *type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  if (index / 2 == 0) {
    gid->raw[0] = 0xfe, gid->raw[1] = 0x80;
    std::memcpy(gid->raw + 13, n, 3);
  } else if (index / 2 == 1) {
    gid->raw[10] = gid->raw[11] = 0xff;
    gid->raw[12] = 10;
    std::memcpy(gid->raw + 13, n, 3);
  } else {
    gid->raw[0] = 0xfd, gid->raw[1] = 0x68, gid->raw[2] = 0x70, gid->raw[3] = 0x75;
    std::memcpy(gid->raw + 13, n, 3);
  }
}

// The node a GID of this fabric names; false for a GID the fake does not hand out.
bool gid_node(const ibv_gid &g, uint32_t *node) {
  static const uint8_t ib[13] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 'h', 'p', 'u', 0, 0};
  static const uint8_t ll[13] = {0xfe, 0x80};
  static const uint8_t v4[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10};
  static const uint8_t v6[13] = {0xfd, 0x68, 0x70, 0x75};
  for (const uint8_t *prefix : {ib, ll, v4, v6})
    if (std::memcmp(g.raw, prefix, 13) == 0) {
      *node = static_cast<uint32_t>(g.raw[13]) << 16 | static_cast<uint32_t>(g.raw[14]) << 8 | g.raw[15];
      return *node != 0;
    }
  return false;
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
  if (!create) return static_cast<Wire *>(p);
  Wire *w = new (p) Wire();
  w->owner_pid = static_cast<int32_t>(getpid());
  return w;
}

TQp *tqp(ibv_qp *q) { return reinterpret_cast<TQp *>(q); }
TCq *tcq(ibv_cq *c) { return reinterpret_cast<TCq *>(c); }

// An asynchronous event for one context (under the adapter's lock).
void post_event(TContext *c, const ibv_async_event &e) {
  c->events.push_back(e);
  uint64_t one = 1;
  if (write(c->ctx.async_fd, &one, sizeof one) != sizeof one) {
    // The eventfd counter cannot overflow here; nothing to do if it did.
  }
}

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

// The QP goes to the error state: what is queued completes as flushed. With an
// event (QP_FATAL, QP_ACCESS_ERR) when the hardware put it there.
void to_error(TQp *q, int event = -1) {
  bool was = q->qp.state == IBV_QPS_ERR;
  q->qp.state = IBV_QPS_ERR;
  for (auto &p : q->sends) push_wc(q->scq, p.wr_id, IBV_WC_WR_FLUSH_ERR, p.opcode, 0, q->qp.qp_num);
  q->sends.clear();
  for (auto &r : q->recvs) push_wc(q->rcq, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, q->qp.qp_num);
  q->recvs.clear();
  if (q->in) q->in->receiver_error.store(1, std::memory_order_release);
  if (event >= 0 && !was) {
    ibv_async_event e{};
    e.element.qp = &q->qp;
    e.event_type = static_cast<ibv_event_type>(event);
    post_event(reinterpret_cast<TContext *>(q->qp.context), e);
  }
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
      to_error(q, IBV_EVENT_QP_ACCESS_ERR);  // the responder's QP goes to error too
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

// Whether the responder can hear us: alive, not in error, and (once it is at
// RTR) using a GID of our type.
bool unanswered(TQp *q) {
  uint32_t theirs = q->out->receiver_gid_type.load(std::memory_order_acquire);
  return q->out->receiver_error.load(std::memory_order_acquire) || (theirs && theirs != q->gid_type + 1) ||
         peer_dead(q);
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
  if (q->sends.empty() || !unanswered(q)) {
    q->unanswered_since = {};
    return;
  }
  auto now = std::chrono::steady_clock::now();  // no responder answers: the retries run out
  if (q->unanswered_since == std::chrono::steady_clock::time_point{}) q->unanswered_since = now;
  if (now - q->unanswered_since >= q->retry_time) fail_front(q, IBV_WC_RETRY_EXC_ERR);
}

// Every QP of this process on device `d` (through the CQs, which list them).
std::vector<TQp *> qps_of(TDevice *d, const std::vector<TCq *> &cqs) {
  std::vector<TQp *> out;
  for (TCq *c : cqs)
    for (TQp *q : c->qps)
      if (device_of(q->qp.context) == d && std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
  return out;
}

std::vector<TCq *> &all_cqs() {
  static auto *v = new std::vector<TCq *>();
  return *v;
}

void device_event(TDevice *d, ibv_event_type type, int port) {
  ibv_async_event e{};
  e.event_type = type;
  e.element.port_num = port;
  for (TContext *c : d->contexts) post_event(c, e);
}

bool has(int mask, int required) { return (mask & required) == required; }

// INIT -> RTR: connect to the peer's QP named by the address vector's GID.
int to_rtr(TQp *q, const ibv_qp_attr *attr) {
  TDevice *d = device_of(q->qp.context);
  const ibv_ah_attr &ah = attr->ah_attr;
  // The fabric routes by GID: the GRH is needed (on an Ethernet port, RoCE, as on real hardware).
  if (!ah.is_global || ah.port_num != q->port) return EINVAL;
  ibv_gid sgid;
  if (ah.grh.sgid_index >= (d->ethernet ? kRoceGids : 1)) return EINVAL;
  make_gid(*d, ah.grh.sgid_index, &sgid, &q->gid_type);
  uint32_t node;
  if (!gid_node(ah.grh.dgid, &node)) return EINVAL;
  std::string name = wire_name(node, attr->dest_qp_num);
  Wire *out = map_wire(name, false);
  if (!out) return EINVAL;  // no such QP on the fabric
  shm_unlink(name.c_str());  // RC is one to one: no one else maps it
  if (q->out) munmap(q->out, sizeof(Wire));
  q->out = out;
  if (q->peer_pidfd >= 0) close(q->peer_pidfd);
  q->peer_pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(out->owner_pid), 0));
  q->in->receiver_gid_type.store(q->gid_type + 1, std::memory_order_release);
  return 0;
}

int post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
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

// The fault due on this send, if any (under the lock).
Fault next_fault() {
  auto &a = adapter();
  return a.fault != Fault::none && a.posted++ == a.fault_after ? a.fault : Fault::none;
}

int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  TQp *q = tqp(qp);
  TDevice *d = device_of(q->qp.context);
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
    Fault fault = next_fault();
    if (fault == Fault::port_down && !d->port_down[q->port]) {
      d->port_down[q->port] = true;
      device_event(d, IBV_EVENT_PORT_ERR, q->port);
    }
    if (fault == Fault::device_fatal && !d->fatal) {
      d->fatal = true;
      device_event(d, IBV_EVENT_DEVICE_FATAL, 0);
      for (TQp *x : qps_of(d, all_cqs())) to_error(x);
      continue;
    }
    if (d->port_down[q->port] || fault == Fault::retry_exceeded) {
      fail_front(q, IBV_WC_RETRY_EXC_ERR);
      continue;
    }
    if (fault == Fault::qp_error) {
      to_error(q, IBV_EVENT_QP_FATAL);
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

int poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
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

// The fault HPU_FAKE_IBV_FAULT asks for; a value equal to the one in force
// changes nothing (its count goes on).
void read_fault() {
  const char *env = getenv("HPU_FAKE_IBV_FAULT");
  std::string spec = env ? env : "";
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  if (spec == a.fault_spec) return;
  size_t colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  Fault fault = kind == "retry_exceeded" ? Fault::retry_exceeded
                : kind == "remote_access" ? Fault::remote_access
                : kind == "qp_error"      ? Fault::qp_error
                : kind == "port_down"     ? Fault::port_down
                : kind == "device_fatal"  ? Fault::device_fatal
                                          : Fault::none;
  char *end = nullptr;
  long after = colon == std::string::npos ? 0 : strtol(spec.c_str() + colon + 1, &end, 10);
  if ((fault == Fault::none && !spec.empty()) || after < 0 || (end && (*end || end == spec.c_str() + colon + 1))) {
    fprintf(stderr,
            "fake libibverbs: HPU_FAKE_IBV_FAULT=\"%s\" is invalid: expected kind[:n], kind one of retry_exceeded, "
            "remote_access, qp_error, port_down, device_fatal\n",
            spec.c_str());
    abort();
  }
  a.fault_spec = spec;
  a.fault = fault;
  a.fault_after = after;
  a.posted = 0;
}

}  // namespace

// --- libibverbs' entry points ----------------------------------------------

ibv_device **ibv_get_device_list(int *n) {
  read_fault();
  if (n) *n = 2;
  return adapter().list;
}
void ibv_free_device_list(ibv_device **) {}
const char *ibv_get_device_name(ibv_device *d) { return d->name; }

ibv_context *ibv_open_device(ibv_device *d) {
  auto &a = adapter();
  TDevice *dev = nullptr;
  for (auto &x : a.devices)
    if (&x.device == d) dev = &x;
  if (!dev) {
    errno = ENODEV;
    return nullptr;
  }
  int efd = eventfd(0, EFD_CLOEXEC);
  if (efd < 0) return nullptr;
  auto *c = new TContext{};
  c->ctx.device = d;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = efd;
  // The calls <infiniband/verbs.h> inlines dispatch through these, as they do
  // to a provider's.
  c->ctx.ops.post_send = post_send;
  c->ctx.ops.post_recv = post_recv;
  c->ctx.ops.poll_cq = poll_cq;
  c->dev = dev;
  std::lock_guard<std::mutex> lock(a.mu);
  dev->contexts.push_back(c);
  return &c->ctx;
}
int ibv_close_device(ibv_context *ctx) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  auto *c = reinterpret_cast<TContext *>(ctx);
  auto &v = c->dev->contexts;
  v.erase(std::remove(v.begin(), v.end(), c), v.end());
  close(c->ctx.async_fd);
  delete c;
  return 0;
}

int ibv_query_device(ibv_context *c, ibv_device_attr *attr) {
  std::memset(attr, 0, sizeof *attr);
  std::strcpy(attr->fw_ver, "fake-ibverbs");
  attr->phys_port_cnt = static_cast<uint8_t>(device_of(c)->ports);
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = kMaxWr;
  attr->max_sge = kMaxSge;
  attr->max_cqe = 1 << 16;
  attr->max_mr_size = UINT64_MAX;
  return 0;
}

// The exported ibv_query_port fills the leading part of ibv_port_attr that
// its older, compatible layout has (up to flags), as rdma-core's does.
int ibv_query_port(ibv_context *c, uint8_t port, _compat_ibv_port_attr *compat) {
  auto *attr = reinterpret_cast<ibv_port_attr *>(compat);
  TDevice *d = device_of(c);
  if (port < 1 || port > d->ports) return EINVAL;
  std::lock_guard<std::mutex> lock(adapter().mu);
  std::memset(attr, 0, offsetof(ibv_port_attr, port_cap_flags2));
  attr->state = d->port_down[port] || d->fatal ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->max_mtu = attr->active_mtu = d->ethernet ? IBV_MTU_1024 : IBV_MTU_4096;
  attr->lid = d->ethernet ? 0 : static_cast<uint16_t>(adapter().node & 0xffff);
  attr->link_layer = d->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  attr->gid_tbl_len = d->ethernet ? kRoceGids : 1;
  return 0;
}

int _ibv_query_gid_ex(ibv_context *c, uint32_t port, uint32_t index, ibv_gid_entry *entry, uint32_t flags,
                   size_t entry_size) {
  TDevice *d = device_of(c);
  if (port < 1 || port > static_cast<uint32_t>(d->ports) || flags || entry_size < sizeof *entry ||
      index >= static_cast<uint32_t>(d->ethernet ? kRoceGids : 1))
    return EINVAL;
  std::memset(entry, 0, sizeof *entry);
  entry->gid_index = index;
  entry->port_num = port;
  make_gid(*d, static_cast<int>(index), &entry->gid, &entry->gid_type);
  return 0;
}

int ibv_query_gid(ibv_context *c, uint8_t port, int index, ibv_gid *gid) {
  ibv_gid_entry e;
  if (index < 0 || _ibv_query_gid_ex(c, port, static_cast<uint32_t>(index), &e, 0, sizeof e) != 0) return -1;
  *gid = e.gid;
  return 0;
}

ibv_pd *ibv_alloc_pd(ibv_context *c) {
  auto *p = new TPd{};
  p->pd.context = c;
  return &p->pd;
}
int ibv_dealloc_pd(ibv_pd *pd) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  auto *p = reinterpret_cast<TPd *>(pd);
  if (p->users) return EBUSY;
  delete p;
  return 0;
}

ibv_mr *ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
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
int ibv_dereg_mr(ibv_mr *mr) {
  auto &a = adapter();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.mrs.find(mr->lkey);
  if (it == a.mrs.end() || &it->second->mr != mr) return EINVAL;
  reinterpret_cast<TPd *>(mr->pd)->users--;
  delete it->second;
  a.mrs.erase(it);
  return 0;
}

ibv_cq *ibv_create_cq(ibv_context *c, int cqe, void *cq_context, ibv_comp_channel *, int) {
  if (cqe < 1 || cqe > (1 << 16)) {
    errno = EINVAL;
    return nullptr;
  }
  auto *q = new TCq{};
  q->cq.context = c;
  q->cq.cq_context = cq_context;
  q->cq.cqe = cqe;
  q->depth = cqe;
  std::lock_guard<std::mutex> lock(adapter().mu);
  all_cqs().push_back(q);
  return &q->cq;
}
int ibv_destroy_cq(ibv_cq *cq) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  if (!tcq(cq)->qps.empty()) return EBUSY;
  auto &v = all_cqs();
  v.erase(std::remove(v.begin(), v.end(), tcq(cq)), v.end());
  delete tcq(cq);
  return 0;
}

ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) {
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
  q->in_name = wire_name(a.node, q->qp.qp_num);
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

int ibv_destroy_qp(ibv_qp *qp) {
  std::lock_guard<std::mutex> lock(adapter().mu);
  TQp *q = tqp(qp);
  for (TCq *c : {q->scq, q->rcq}) {
    auto &v = c->qps;
    v.erase(std::remove(v.begin(), v.end(), q), v.end());
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

int ibv_modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
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
    if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num < 1 ||
        attr->port_num > device_of(q->qp.context)->ports)
      return EINVAL;
    q->port = attr->port_num;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                       IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    if (int e = to_rtr(q, attr)) return e;
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

int ibv_get_async_event(ibv_context *ctx, ibv_async_event *event) {
  auto *c = reinterpret_cast<TContext *>(ctx);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(adapter().mu);
      if (!c->events.empty()) {
        *event = c->events.front();
        c->events.pop_front();
        uint64_t n;
        if (c->events.empty() && read(ctx->async_fd, &n, sizeof n) != sizeof n) {
          // The counter was set when the event was queued; nothing else reads it.
        }
        return 0;
      }
    }
    if (fcntl(ctx->async_fd, F_GETFL) & O_NONBLOCK) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{ctx->async_fd, POLLIN, 0};
    ::poll(&p, 1, -1);
  }
}

void ibv_ack_async_event(ibv_async_event *) {}

const char *ibv_event_type_str(ibv_event_type e) {
  switch (e) {
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    default: return "unknown";
  }
}

const char *ibv_wc_status_str(ibv_wc_status s) {
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
