// The verbs function table, loaded through dlopen: from rdma-core's
// libibverbs.so.1 it finds no device on this machine; from the FAKE
// libibverbs of tests/support/fake_ibverbs (HPU_IB_LIBRARY names it) it
// behaves as the verbs do (QP state machine, MR keys and bounds, completions,
// the fabric between threads and processes, injected faults). Nothing here
// measures RDMA.
//
// Each test expects a process of its own, as CTest runs them: the fake keeps
// its state for the process (a port an injected fault took down stays down),
// and once it is loaded, dlopen of its soname, libibverbs.so.1, finds it
// instead of rdma-core's.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/transports/verbs/api.hpp"
#include "core/error.hpp"

using namespace hpu::comm;

namespace {

// The table of the fake libibverbs.
const VerbsApi &A() {
  std::string why;
  const VerbsApi *api = verbs_load(HPU_FAKE_IBVERBS, &why);
  if (!api) throw std::runtime_error(why);
  return *api;
}

// The fault the fake injects from the next device listing on (each Endpoint
// lists the devices).
void fake_fault(const char *spec) { setenv("HPU_FAKE_IBV_FAULT", spec, 1); }

struct Endpoint {
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;
  ibv_cq *cq = nullptr;
  ibv_qp *qp = nullptr;
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16);
  ibv_mr *mr = nullptr;
  ibv_gid gid{};

  explicit Endpoint(int device = 0) {
    int n = 0;
    ibv_device **list = A().get_device_list(&n);
    ctx = A().open_device(list[device]);
    A().free_device_list(list);
    pd = A().alloc_pd(ctx);
    cq = A().create_cq(ctx, 256, nullptr, nullptr, 0);
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = 64;
    qp = A().create_qp(pd, &qa);
    mr = A().reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    A().query_gid(ctx, 1, 0, &gid);
  }
  ~Endpoint() {
    A().destroy_qp(qp);
    A().dereg_mr(mr);
    A().destroy_cq(cq);
    A().dealloc_pd(pd);
    A().close_device(ctx);
  }

  int init() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    return A().modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  int rtr(const ibv_gid &peer_gid, uint32_t peer_qpn) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer_qpn;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer_gid;
    a.ah_attr.port_num = 1;
    return A().modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
  int rts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    return A().modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                     IBV_QP_MAX_QP_RD_ATOMIC);
  }
  int post_recv(uint64_t id, size_t off, uint32_t len) {
    ibv_sge s{reinterpret_cast<uintptr_t>(mem.data() + off), len, mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    return A().post_recv(qp, &wr, &bad);
  }
  int post(ibv_wr_opcode op, uint64_t id, size_t off, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0,
           uint32_t lkey = 0, unsigned flags = IBV_SEND_SIGNALED) {
    ibv_sge s{reinterpret_cast<uintptr_t>(mem.data() + off), len, lkey ? lkey : mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = 0xabcd;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return A().post_send(qp, &wr, &bad);
  }
  // Polls until a completion arrives (or 5 s pass).
  ibv_wc next() {
    ibv_wc wc{};
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (A().poll_cq(cq, 1, &wc) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "no completion within 5 s";
        wc.status = IBV_WC_GENERAL_ERR;
        wc.wr_id = ~0ull;
        return wc;
      }
      std::this_thread::yield();
    }
    return wc;
  }
};

void connect(Endpoint &a, Endpoint &b) {
  ASSERT_EQ(a.init(), 0);
  ASSERT_EQ(b.init(), 0);
  ASSERT_EQ(a.rtr(b.gid, b.qp->qp_num), 0);
  ASSERT_EQ(b.rtr(a.gid, a.qp->qp_num), 0);
  ASSERT_EQ(a.rts(), 0);
  ASSERT_EQ(b.rts(), 0);
}

}  // namespace

TEST(VerbsReal, LoadsLibibverbsAndFindsNoDevice) {
  std::string why;
  const VerbsApi *api = verbs_load("libibverbs.so.1", &why);
  ASSERT_NE(api, nullptr) << why;  // libibverbs1 is a dependency (scripts/packages.txt)
  EXPECT_STREQ(api->name, "libibverbs.so.1");
  std::vector<VerbsPort> ports;
  EXPECT_FALSE(verbs_find_ports(*api, hpu::IbConfig{}, &ports, &why));  // this machine has no RDMA device
  EXPECT_NE(why.find("no RDMA device found"), std::string::npos) << why;
}

// HPU_IB_LIBRARY names the library dlopen loads (default libibverbs.so.1);
// one that cannot be loaded, or lacks an entry point, makes verbs unavailable
// with the reason. HPU_IB_ADAPTER, which chose a test adapter inside libhpu,
// is no longer a setting.
TEST(VerbsReal, LibraryVariableSelectsTheLibrary) {
  std::string why;
  unsetenv("HPU_IB_LIBRARY");
  EXPECT_EQ(verbs_api(hpu::load_config().comm.ib, &why), verbs_load("libibverbs.so.1", &why));
  setenv("HPU_IB_LIBRARY", HPU_FAKE_IBVERBS, 1);
  const VerbsApi *fake = verbs_api(hpu::load_config().comm.ib, &why);
  ASSERT_NE(fake, nullptr) << why;
  EXPECT_STREQ(fake->name, HPU_FAKE_IBVERBS);
  EXPECT_NE(fake, verbs_load("libibverbs.so.1", &why));
  setenv("HPU_IB_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  EXPECT_EQ(verbs_api(hpu::load_config().comm.ib, &why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libibverbs.so.1 cannot be loaded"), std::string::npos) << why;
  setenv("HPU_IB_LIBRARY", "libz.so.1", 1);  // a library, but not libibverbs
  EXPECT_EQ(verbs_api(hpu::load_config().comm.ib, &why), nullptr);
  EXPECT_NE(why.find("libz.so.1 has no symbol ibv_get_device_list"), std::string::npos) << why;
  unsetenv("HPU_IB_LIBRARY");
  setenv("HPU_IB_ADAPTER", "test", 1);
  try {
    hpu::load_config();
    FAIL() << "HPU_IB_ADAPTER=test accepted";
  } catch (const hpu::Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("HPU_IB_ADAPTER=\"test\" is invalid: the setting no longer exists"),
              std::string::npos)
        << e.what();
  }
  unsetenv("HPU_IB_ADAPTER");
}

TEST(VerbsReal, HcaFilter) {
  EXPECT_TRUE(verbs_hca_allows("", "mlx5_0", 1));
  EXPECT_TRUE(verbs_hca_allows("mlx5", "mlx5_0", 1));
  EXPECT_FALSE(verbs_hca_allows("=mlx5", "mlx5_0", 1));
  EXPECT_TRUE(verbs_hca_allows("=mlx5_0", "mlx5_0", 1));
  EXPECT_TRUE(verbs_hca_allows("mlx5_1,mlx5_0:1", "mlx5_0", 1));
  EXPECT_FALSE(verbs_hca_allows("mlx5_0:2", "mlx5_0", 1));
  EXPECT_FALSE(verbs_hca_allows("^mlx5_0", "mlx5_0", 1));
  EXPECT_TRUE(verbs_hca_allows("^mlx5_0", "mlx5_1", 1));
}

// The fake is a libibverbs.so.1 as rdma-core's is: the entry points under
// rdma-core's default symbol versions, the calls verbs.h inlines not exported
// but reached through the context's ops.
TEST(VerbsFake, ExportsLibibverbsEntryPoints) {
  void *lib = dlopen(HPU_FAKE_IBVERBS, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_NE(dlvsym(lib, "ibv_open_device", "IBVERBS_1.1"), nullptr);
  EXPECT_NE(dlvsym(lib, "ibv_query_port", "IBVERBS_1.1"), nullptr);
  EXPECT_NE(dlvsym(lib, "_ibv_query_gid_ex", "IBVERBS_1.11"), nullptr);
  EXPECT_EQ(dlsym(lib, "ibv_post_send"), nullptr);
  int n = 0;
  ibv_device **list = A().get_device_list(&n);
  ASSERT_EQ(n, 2);
  ibv_context *ctx = A().open_device(list[0]);
  ASSERT_NE(ctx, nullptr);
  EXPECT_NE(ctx->ops.post_send, nullptr);
  EXPECT_NE(ctx->ops.post_recv, nullptr);
  EXPECT_NE(ctx->ops.poll_cq, nullptr);
  A().close_device(ctx);
  A().free_device_list(list);
  dlclose(lib);
}

// With the fake's folder on LD_LIBRARY_PATH, the default HPU_IB_LIBRARY
// (libibverbs.so.1) loads the fake: the dynamic linker finds it as it finds
// rdma-core's. The dynamic linker reads LD_LIBRARY_PATH when the process
// starts, so this test runs itself again in a new process with it set.
TEST(VerbsFake, FoundUnderTheDefaultNameOnLdLibraryPath) {
  std::string dir = HPU_FAKE_IBVERBS;
  dir.resize(dir.rfind('/'));
  const char *ld = getenv("LD_LIBRARY_PATH");
  if (ld && dir == ld) {  // the new process
    unsetenv("HPU_IB_LIBRARY");
    std::string why;
    const VerbsApi *api = verbs_api(hpu::load_config().comm.ib, &why);
    ASSERT_NE(api, nullptr) << why;
    EXPECT_STREQ(api->name, "libibverbs.so.1");
    int n = 0;
    ibv_device **list = api->get_device_list(&n);
    ASSERT_EQ(n, 2);
    EXPECT_STREQ(api->get_device_name(list[0]), "hpu_test0");
    api->free_device_list(list);
    return;
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LD_LIBRARY_PATH", dir.c_str(), 1);
    execl("/proc/self/exe", "test_verbs_adapter", "--gtest_filter=VerbsFake.FoundUnderTheDefaultNameOnLdLibraryPath",
          static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the new process's status: " << status;
}

// A fault the fake does not know stops the test loudly instead of running it
// without its fault.
TEST(VerbsFake, UnknownFaultAborts) {
  EXPECT_DEATH(
      {
        fake_fault("meteor");
        int n = 0;
        A().get_device_list(&n);
      },
      "HPU_FAKE_IBV_FAULT=\"meteor\" is invalid");
  EXPECT_DEATH(
      {
        fake_fault("qp_error:x");
        int n = 0;
        A().get_device_list(&n);
      },
      "HPU_FAKE_IBV_FAULT=\"qp_error:x\" is invalid");
  unsetenv("HPU_FAKE_IBV_FAULT");
}

TEST(VerbsFake, FindsItsPortAndHonoursTheFilter) {
  std::vector<VerbsPort> ports;
  std::string why;
  hpu::IbConfig cfg;
  ASSERT_TRUE(verbs_find_ports(A(), cfg, &ports, &why)) << why;
  ASSERT_EQ(ports.size(), 2u);  // both InfiniBand ports of hpu_test0
  EXPECT_EQ(ports[0].device, "hpu_test0");
  EXPECT_EQ(ports[0].port, 1);
  EXPECT_EQ(ports[1].port, 2);
  EXPECT_FALSE(ports[0].ethernet);
  cfg.hca = "hpu_test0:2";
  ASSERT_TRUE(verbs_find_ports(A(), cfg, &ports, &why)) << why;
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].port, 2);
  cfg.hca = "mlx5_0";
  EXPECT_FALSE(verbs_find_ports(A(), cfg, &ports, &why));
  EXPECT_NE(why.find("excluded by HPU_IB_HCA"), std::string::npos) << why;
}

TEST(VerbsFake, QpStateMachine) {
  Endpoint a, b;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(A().modify_qp(a.qp, &attr, IBV_QP_STATE), EINVAL);  // RESET -> RTR
  attr.qp_state = IBV_QPS_INIT;
  EXPECT_EQ(A().modify_qp(a.qp, &attr, IBV_QP_STATE), EINVAL);  // INIT needs port, pkey, access
  EXPECT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), EINVAL);               // sends need RTS
  ASSERT_EQ(a.init(), 0);
  EXPECT_EQ(a.rts(), EINVAL);                                    // INIT -> RTS
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(A().modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_AV), EINVAL);  // missing DEST_QPN etc.
  EXPECT_EQ(a.rtr(b.gid, 0xdead), EINVAL);                       // no such QP on the fabric
  ASSERT_EQ(b.init(), 0);
  ASSERT_EQ(a.rtr(b.gid, b.qp->qp_num), 0);
  EXPECT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), EINVAL);               // RTR receives only
  ASSERT_EQ(a.rts(), 0);
  EXPECT_EQ(a.qp->state, IBV_QPS_RTS);
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(A().modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
  EXPECT_EQ(a.rts(), EINVAL);                                    // ERR -> RTS
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(A().modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
  EXPECT_EQ(a.init(), 0);
}

TEST(VerbsFake, MemoryRegionRules) {
  Endpoint a;
  std::vector<uint8_t> buf(64);
  errno = 0;
  EXPECT_EQ(A().reg_mr(a.pd, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);  // needs LOCAL_WRITE
  EXPECT_EQ(errno, EINVAL);
  ibv_mr *m = A().reg_mr(a.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m->lkey, a.mr->lkey);
  EXPECT_EQ(A().dealloc_pd(a.pd), EBUSY);  // MRs and QPs still use it
  EXPECT_EQ(A().destroy_cq(a.cq), EBUSY);
  EXPECT_EQ(A().dereg_mr(m), 0);
}

TEST(VerbsFake, SendWriteAndCompletions) {
  Endpoint a, b;
  connect(a, b);
  for (int i = 0; i < 64; ++i) a.mem[static_cast<size_t>(i)] = static_cast<uint8_t>(i + 1);
  // A SEND before its receive is posted waits (RNR), then lands.
  ASSERT_EQ(a.post(IBV_WR_SEND, 7, 0, 32), 0);
  ibv_wc wc{};
  EXPECT_EQ(A().poll_cq(b.cq, 1, &wc), 0);
  ASSERT_EQ(b.post_recv(9, 1000, 64), 0);
  wc = b.next();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 32u);
  EXPECT_EQ(std::memcmp(b.mem.data() + 1000, a.mem.data(), 32), 0);
  wc = a.next();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  // RDMA write with immediate: the data goes to the address, the receive carries the immediate.
  ASSERT_EQ(b.post_recv(10, 0, 0), 0);
  ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, 8, 0, 48, reinterpret_cast<uintptr_t>(b.mem.data() + 4096),
                   b.mr->rkey), 0);
  wc = b.next();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc.imm_data, 0xabcdu);
  EXPECT_EQ(std::memcmp(b.mem.data() + 4096, a.mem.data(), 48), 0);
  EXPECT_EQ(a.next().status, IBV_WC_SUCCESS);
  // Inline: larger than the QP's inline size is refused at post time.
  EXPECT_EQ(a.post(IBV_WR_SEND, 11, 0, 65, 0, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE), EINVAL);
}

TEST(VerbsFake, SendQueueDepthIsEnforced) {
  Endpoint a, b;
  connect(a, b);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(a.post(IBV_WR_SEND, static_cast<uint64_t>(i), 0, 8), 0);
  EXPECT_EQ(a.post(IBV_WR_SEND, 16, 0, 8), ENOMEM);
}

TEST(VerbsFake, RemoteAccessErrorOnBadRkeyOrBounds) {
  Endpoint a, b;
  connect(a, b);
  uintptr_t end = reinterpret_cast<uintptr_t>(b.mem.data() + b.mem.size());
  ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE, 1, 0, 64, end - 32, b.mr->rkey), 0);  // 32 bytes past the end
  ASSERT_EQ(b.post_recv(5, 0, 64), 0);
  ibv_wc wc = b.next();  // the responder rejects it and goes to error: its receive is flushed
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(b.qp->state, IBV_QPS_ERR);
  wc = a.next();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);  // the requester learns it
  EXPECT_EQ(a.qp->state, IBV_QPS_ERR);

  Endpoint c, d;
  connect(c, d);
  ASSERT_EQ(c.post(IBV_WR_RDMA_WRITE, 2, 0, 8, reinterpret_cast<uintptr_t>(d.mem.data()), d.mr->rkey + 999), 0);
  A().poll_cq(d.cq, 1, &wc);
  EXPECT_EQ(c.next().status, IBV_WC_REM_ACCESS_ERR);
}

TEST(VerbsFake, LocalProtectionErrorOnBadLkey) {
  Endpoint a, b;
  connect(a, b);
  ASSERT_EQ(a.post(IBV_WR_SEND, 3, 0, 8, 0, 0, a.mr->lkey + 999), 0);
  ibv_wc wc = a.next();
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(a.qp->state, IBV_QPS_ERR);
  ASSERT_EQ(a.post(IBV_WR_SEND, 4, 0, 8), 0);  // posts to a QP in error are flushed
  EXPECT_EQ(a.next().status, IBV_WC_WR_FLUSH_ERR);
}

// Between processes: the child connects to our QP through a pipe-carried
// address, writes into our memory; then dies, and our sends to it end with
// retry exceeded.
TEST(VerbsFake, FabricAcrossProcessesAndDeadPeer) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  struct Addr {
    ibv_gid gid;
    uint32_t qpn;
    uint64_t addr;
    uint32_t rkey;
  };
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Endpoint c;
    Addr mine{c.gid, c.qp->qp_num, reinterpret_cast<uintptr_t>(c.mem.data()), c.mr->rkey}, theirs{};
    if (write(to_parent[1], &mine, sizeof mine) != sizeof mine || read(to_child[0], &theirs, sizeof theirs) != sizeof theirs)
      _exit(2);
    if (c.init() || c.rtr(theirs.gid, theirs.qpn) || c.rts()) _exit(3);
    for (int i = 0; i < 4096; ++i) c.mem[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 7);
    c.post_recv(1, 0, 0);
    if (c.post(IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0, 4096, theirs.addr + 128, theirs.rkey)) _exit(4);
    ibv_wc wc{};
    for (int got = 0; got < 1;) got += A().poll_cq(c.cq, 1, &wc);
    if (wc.status != IBV_WC_SUCCESS) _exit(5);
    char go;
    if (read(to_child[0], &go, 1) != 1) _exit(6);
    _exit(0);  // dies without a word
  }
  Endpoint p;
  Addr mine{p.gid, p.qp->qp_num, reinterpret_cast<uintptr_t>(p.mem.data()), p.mr->rkey}, theirs{};
  ASSERT_EQ(read(to_parent[0], &theirs, sizeof theirs), static_cast<ssize_t>(sizeof theirs));
  ASSERT_EQ(p.init(), 0);
  ASSERT_EQ(p.rtr(theirs.gid, theirs.qpn), 0);
  ASSERT_EQ(p.rts(), 0);
  ASSERT_EQ(p.post_recv(42, 0, 0), 0);
  ASSERT_EQ(write(to_child[1], &mine, sizeof mine), static_cast<ssize_t>(sizeof mine));
  ibv_wc wc = p.next();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.byte_len, 4096u);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(p.mem[static_cast<size_t>(128 + i)], static_cast<uint8_t>(i * 7)) << i;
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(p.post(IBV_WR_SEND, 43, 0, 8), 0);
  wc = p.next();
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc.wr_id, 43u);
}

TEST(VerbsFake, InjectedRetryExceeded) {
  fake_fault("retry_exceeded:1");
  Endpoint a, b;
  connect(a, b);
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);
  EXPECT_EQ(b.next().status, IBV_WC_SUCCESS);
  EXPECT_EQ(a.next().status, IBV_WC_SUCCESS);
  ASSERT_EQ(a.post(IBV_WR_SEND, 2, 0, 8), 0);  // the second send: the fault
  ibv_wc wc = a.next();
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_STREQ(A().wc_status_str(wc.status), "transport retry counter exceeded");
}

TEST(VerbsFake, InjectedPortDown) {
  fake_fault("port_down");
  Endpoint a, b;
  connect(a, b);
  ibv_port_attr pa{};
  ASSERT_EQ(A().query_port(a.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);
  EXPECT_EQ(a.next().status, IBV_WC_RETRY_EXC_ERR);
  ASSERT_EQ(A().query_port(a.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);
  std::vector<VerbsPort> ports;
  std::string why;
  hpu::IbConfig cfg;
  cfg.hca = "hpu_test0:1";
  EXPECT_FALSE(verbs_find_ports(A(), cfg, &ports, &why));
  EXPECT_NE(why.find("not active"), std::string::npos) << why;
}

TEST(VerbsFake, InjectedQpErrorAndRemoteAccess) {
  fake_fault("remote_access");
  Endpoint a, b;
  connect(a, b);
  ASSERT_EQ(a.post(IBV_WR_RDMA_WRITE, 1, 0, 8, reinterpret_cast<uintptr_t>(b.mem.data()), b.mr->rkey), 0);
  ibv_wc wc{};
  A().poll_cq(b.cq, 1, &wc);
  EXPECT_EQ(a.next().status, IBV_WC_REM_ACCESS_ERR);  // a correct write, made bad by the fault
}

// The RoCE device's GID table, read as libibverbs' _ibv_query_gid_ex reads it:
// link-local, IPv4-mapped and IPv6 addresses, each as RoCE v1 and v2.
TEST(VerbsFake, RoceGidTable) {
  int n = 0;
  ibv_device **list = A().get_device_list(&n);
  ASSERT_EQ(n, 2);
  EXPECT_STREQ(A().get_device_name(list[1]), "hpu_test1");
  ibv_context *ctx = A().open_device(list[1]);
  ibv_port_attr pa{};
  ASSERT_EQ(A().query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.lid, 0);
  ASSERT_EQ(pa.gid_tbl_len, 6);
  ibv_gid_entry e[6];
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(A().query_gid_ex(ctx, 1, i, &e[i], 0, sizeof e[i]), 0) << i;
  EXPECT_EQ(A().query_gid_ex(ctx, 1, 6, &e[0], 0, sizeof e[0]), EINVAL);
  for (uint32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(e[i].gid_type, i % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1) << i;
    EXPECT_EQ(std::memcmp(e[i].gid.raw, e[i ^ 1].gid.raw, 16), 0) << i;  // v1 and v2 share the address
  }
  EXPECT_EQ(e[0].gid.raw[0], 0xfe);  // link-local
  EXPECT_EQ(e[2].gid.raw[10], 0xff);  // ::ffff:10.x.y.z
  EXPECT_EQ(e[2].gid.raw[12], 10);
  EXPECT_EQ(e[4].gid.raw[0], 0xfd);  // a unique local IPv6 address
  A().close_device(ctx);
  A().free_device_list(list);
}

namespace {

// An endpoint on the RoCE device, connected with the GIDs at the given indexes.
struct RoceEndpoint : Endpoint {
  RoceEndpoint() : Endpoint(1) {}
  int rtr_with(const Endpoint &peer, int sgid_index, int dgid_index, bool global = true) {
    ibv_gid_entry theirs{};
    A().query_gid_ex(peer.ctx, 1, static_cast<uint32_t>(dgid_index), &theirs, 0, sizeof theirs);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer.qp->qp_num;
    a.ah_attr.is_global = global;
    a.ah_attr.grh.dgid = theirs.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid_index);
    a.ah_attr.port_num = 1;
    return A().modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
};

}  // namespace

// On an Ethernet port the address vector needs the GRH and an sgid_index in
// the table; ends whose GIDs differ in RoCE version never hear each other:
// the sender's retries run out.
TEST(VerbsFake, RoceAddressingAndVersionMismatch) {
  RoceEndpoint a, b;
  ASSERT_EQ(a.init(), 0);
  ASSERT_EQ(b.init(), 0);
  EXPECT_EQ(a.rtr_with(b, 3, 3, false), EINVAL);  // RoCE without the GRH
  EXPECT_EQ(a.rtr_with(b, 6, 3), EINVAL);         // no such source GID
  ASSERT_EQ(a.rtr_with(b, 3, 3), 0);              // a: RoCE v2
  ASSERT_EQ(b.rtr_with(a, 2, 2), 0);              // b: RoCE v1
  ASSERT_EQ(a.rts(), 0);
  ASSERT_EQ(b.rts(), 0);
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  ASSERT_EQ(a.post(IBV_WR_SEND, 5, 0, 8), 0);
  ibv_wc wc = a.next();
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc.wr_id, 5u);
}

// Asynchronous events: the context's async_fd is readable while events wait;
// a non-blocking descriptor with none gives EAGAIN. A QP the fault moves to
// error reports QP_FATAL; the port going down reports PORT_ERR to every
// context of the device.
TEST(VerbsFake, AsyncEvents) {
  fake_fault("qp_error:1");
  Endpoint a, b;
  connect(a, b);
  int fl = fcntl(a.ctx->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(a.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
  ibv_async_event ev{};
  errno = 0;
  EXPECT_EQ(A().get_async_event(a.ctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  ASSERT_EQ(a.post(IBV_WR_SEND, 1, 0, 8), 0);
  EXPECT_EQ(b.next().status, IBV_WC_SUCCESS);
  EXPECT_EQ(a.next().status, IBV_WC_SUCCESS);
  ASSERT_EQ(a.post(IBV_WR_SEND, 2, 0, 8), 0);  // the fault: the QP goes to error
  EXPECT_EQ(a.next().status, IBV_WC_WR_FLUSH_ERR);
  pollfd p{a.ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  ASSERT_EQ(A().get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, a.qp);
  A().ack_async_event(&ev);
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // nothing more

  fake_fault("port_down");
  Endpoint c, d;
  connect(c, d);
  ASSERT_EQ(c.post(IBV_WR_SEND, 3, 0, 8), 0);
  EXPECT_EQ(c.next().status, IBV_WC_RETRY_EXC_ERR);
  for (Endpoint *x : {&c, &d}) {  // blocking: the event is there
    ASSERT_EQ(A().get_async_event(x->ctx, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(ev.element.port_num, 1);
    A().ack_async_event(&ev);
  }
  EXPECT_STREQ(A().event_type_str(IBV_EVENT_PORT_ERR), "port error");
}
