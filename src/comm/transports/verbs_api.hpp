// The verbs function table: every libibverbs call the verbs transport makes
// goes through one VerbsApi, as NCCL's ncclIbvSymbols does. Two tables fill it:
//   - the real one (verbs_api.cpp): libibverbs.so.1 loaded with dlopen at first
//     use, so libhpu loads and runs on machines without rdma-core; the data-path
//     calls that verbs.h inlines (post_send, post_recv, poll_cq) are wrappers
//     that dispatch through the context's ops, as the inlines do;
//   - the TEST ADAPTER (verbs_test_adapter.cpp, HPU_IB_ADAPTER=test): an
//     in-memory stand-in for an HCA, for testing without RDMA hardware. It is
//     not RDMA and measures nothing about RDMA performance.
// Only the types of <infiniband/verbs.h> are used; libhpu does not link
// against libibverbs.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpu::comm {

struct VerbsApi {
  const char *name;  // "libibverbs.so.1" or "test adapter"
  ibv_device **(*get_device_list)(int *num_devices);
  void (*free_device_list)(ibv_device **list);
  const char *(*get_device_name)(ibv_device *device);
  ibv_context *(*open_device)(ibv_device *device);
  int (*close_device)(ibv_context *context);
  int (*query_device)(ibv_context *context, ibv_device_attr *attr);
  int (*query_port)(ibv_context *context, uint8_t port, ibv_port_attr *attr);
  int (*query_gid)(ibv_context *context, uint8_t port, int index, ibv_gid *gid);
  ibv_pd *(*alloc_pd)(ibv_context *context);
  int (*dealloc_pd)(ibv_pd *pd);
  ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr *mr);
  ibv_cq *(*create_cq)(ibv_context *context, int cqe, void *cq_context, ibv_comp_channel *channel, int vector);
  int (*destroy_cq)(ibv_cq *cq);
  ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
  int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(ibv_qp *qp);
  int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
  int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
  int (*poll_cq)(ibv_cq *cq, int n, ibv_wc *wc);
  const char *(*wc_status_str)(ibv_wc_status status);
};

// The real table, or nullptr with the reason in *why ("libibverbs.so.1 not
// found: ..."). Loaded once per process.
const VerbsApi *verbs_real_api(std::string *why);

// The test adapter's table (always available).
const VerbsApi *verbs_test_api();

// The table HPU_IB_ADAPTER selects: unset or "libibverbs" the real one, "test"
// the test adapter; anything else fails with HPU_ERROR_CONFIG.
const VerbsApi *verbs_api(std::string *why);

// An active port to use.
struct VerbsPort {
  std::string device;  // "mlx5_0"
  int port = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  uint16_t lid = 0;
  ibv_gid gid{};
  bool ethernet = false;  // RoCE: addressed by GID
};

// Finds the first active port among the devices HPU_IB_HCA allows (a list like
// NCCL_IB_HCA: "mlx5_0:1,mlx5_1", "^mlx5_2" excludes, "=" exact names; unset:
// all). Returns false with the reason ("no RDMA device found", "no active port
// on mlx5_0 ...") in *why.
bool verbs_find_port(const VerbsApi &api, const char *hca, VerbsPort *out, std::string *why);

// Whether device `name` port `port` passes the HPU_IB_HCA filter `hca`.
bool verbs_hca_allows(const char *hca, const std::string &name, int port);

}  // namespace hpu::comm
