// The verbs function table: every libibverbs call the verbs transport makes
// goes through one VerbsApi, as NCCL's ncclIbvSymbols does. It is filled from
// libibverbs loaded with dlopen at first use (HPU_IB_LIBRARY, default
// libibverbs.so.1), so libhpu loads and runs on machines without rdma-core;
// the data-path calls that verbs.h inlines (post_send, post_recv, poll_cq) are
// wrappers that dispatch through the context's ops, as the inlines do. (The
// test suite loads a fake libibverbs this way: tests/support/fake_ibverbs.)
// Only the types of <infiniband/verbs.h> are used; libhpu does not link
// against libibverbs. Settings come from IbConfig (HPU_IB_*, core/config.hpp).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"

namespace hpu::comm {

struct VerbsApi {
  const char *name;  // the library loaded, as HPU_IB_LIBRARY names it ("libibverbs.so.1")
  ibv_device **(*get_device_list)(int *num_devices);
  void (*free_device_list)(ibv_device **list);
  const char *(*get_device_name)(ibv_device *device);
  ibv_context *(*open_device)(ibv_device *device);
  int (*close_device)(ibv_context *context);
  int (*query_device)(ibv_context *context, ibv_device_attr *attr);
  int (*query_port)(ibv_context *context, uint8_t port, ibv_port_attr *attr);
  int (*query_gid)(ibv_context *context, uint8_t port, int index, ibv_gid *gid);
  // _ibv_query_gid_ex (libibverbs 1.11, rdma-core 32): the GID with its type
  // (IB, RoCE v1, RoCE v2). nullptr in an older library: GIDs are then chosen
  // by address family alone.
  int (*query_gid_ex)(ibv_context *context, uint32_t port, uint32_t index, ibv_gid_entry *entry, uint32_t flags,
                      size_t entry_size);
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
  // Asynchronous events (port down, device fatal, QP errors): read from the
  // context's async_fd, which the transport makes non-blocking; every event
  // got is acknowledged.
  int (*get_async_event)(ibv_context *context, ibv_async_event *event);
  void (*ack_async_event)(ibv_async_event *event);
  const char *(*event_type_str)(ibv_event_type event);
  const char *(*wc_status_str)(ibv_wc_status status);
};

// The table of `library` (a file name dlopen searches for, or a path), or
// nullptr with the reason in *why ("libibverbs.so.1 cannot be loaded (...)").
// Each library is loaded once per process and stays loaded.
const VerbsApi *verbs_load(const std::string &library, std::string *why);

// The table of the library cfg.library names.
const VerbsApi *verbs_api(const IbConfig &cfg, std::string *why);

// A port to use, with the GID this rank is addressed by.
struct VerbsPort {
  std::string device;  // "mlx5_0"
  int port = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  uint16_t lid = 0;
  bool ethernet = false;  // RoCE: addressed by GID
  int gid_index = 0;
  ibv_gid gid{};
  uint32_t gid_type = IBV_GID_TYPE_IB;  // ibv_gid_type
};

// The active ports this rank uses: those of the first device with an active
// port that cfg.hca allows (a list like NCCL_IB_HCA: "mlx5_0:1,mlx5_1", "^"
// excludes, "=" exact names; empty: all), that have that port's link layer.
// Several ports: the transport stripes its queue pairs over them. On Ethernet
// (RoCE) ports the GID is chosen as verbs_pick_gid says. Returns false with the
// reason ("no RDMA device found", "no active RDMA port: mlx5_0:1 (not active)")
// in *why; throws Error(HPU_ERROR_CONFIG) for an HPU_IB_GID_INDEX the port lacks.
bool verbs_find_ports(const VerbsApi &api, const IbConfig &cfg, std::vector<VerbsPort> *out, std::string *why);

// Whether device `name` port `port` passes the HPU_IB_HCA filter `hca`.
bool verbs_hca_allows(const std::string &hca, const std::string &name, int port);

// The GID of an Ethernet (RoCE) port: cfg.gid_index when set (>= 0), else the
// first entry of the port's table whose address family is cfg.addr_family
// (IPv4: an IPv4-mapped GID; IPv6: another, link-local ones last) and whose type
// is RoCE v<cfg.roce_version>; failing that the family with the other version,
// then the first valid entry (each fallback logged as a warning). Fills
// port->gid_index, gid and gid_type; false with the reason when no entry is valid.
bool verbs_pick_gid(const VerbsApi &api, ibv_context *ctx, int gid_table_len, const IbConfig &cfg, VerbsPort *port,
                    std::string *why);

// "RoCE v2 IPv4 ::ffff:10.1.2.3 (index 3)" for messages.
std::string describe_gid(const VerbsPort &port);

}  // namespace hpu::comm
