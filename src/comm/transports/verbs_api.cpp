// The real verbs table (libibverbs.so.1 through dlopen), the choice between it
// and the test adapter, and port discovery.
#include "comm/transports/verbs_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.hpp"

namespace hpu::comm {

namespace {

// verbs.h inlines these three: they dispatch through the context's ops table.
int real_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) { return qp->context->ops.post_send(qp, wr, bad); }
int real_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) { return qp->context->ops.post_recv(qp, wr, bad); }
int real_poll_cq(ibv_cq *cq, int n, ibv_wc *wc) { return cq->context->ops.poll_cq(cq, n, wc); }

struct Loaded {
  VerbsApi api{};
  std::string why;  // empty when loaded
};

template <class F>
bool load(void *lib, const char *symbol, F *&out, std::string &why) {
  out = reinterpret_cast<F *>(dlsym(lib, symbol));
  if (!out && why.empty()) why = strf("libibverbs.so.1 has no symbol %s", symbol);
  return out != nullptr;
}

Loaded load_real() {
  Loaded l;
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    l.why = strf("libibverbs.so.1 cannot be loaded (%s); install libibverbs1 (rdma-core)", e ? e : "not found");
    return l;
  }
  VerbsApi &a = l.api;
  a.name = "libibverbs.so.1";
  load(lib, "ibv_get_device_list", a.get_device_list, l.why);
  load(lib, "ibv_free_device_list", a.free_device_list, l.why);
  load(lib, "ibv_get_device_name", a.get_device_name, l.why);
  load(lib, "ibv_open_device", a.open_device, l.why);
  load(lib, "ibv_close_device", a.close_device, l.why);
  load(lib, "ibv_query_device", a.query_device, l.why);
  // The exported ibv_query_port fills the leading, compatible part of ibv_port_attr.
  load(lib, "ibv_query_port", a.query_port, l.why);
  load(lib, "ibv_query_gid", a.query_gid, l.why);
  load(lib, "ibv_alloc_pd", a.alloc_pd, l.why);
  load(lib, "ibv_dealloc_pd", a.dealloc_pd, l.why);
  load(lib, "ibv_reg_mr", a.reg_mr, l.why);
  load(lib, "ibv_dereg_mr", a.dereg_mr, l.why);
  load(lib, "ibv_create_cq", a.create_cq, l.why);
  load(lib, "ibv_destroy_cq", a.destroy_cq, l.why);
  load(lib, "ibv_create_qp", a.create_qp, l.why);
  load(lib, "ibv_modify_qp", a.modify_qp, l.why);
  load(lib, "ibv_destroy_qp", a.destroy_qp, l.why);
  load(lib, "ibv_wc_status_str", a.wc_status_str, l.why);
  a.post_send = real_post_send;
  a.post_recv = real_post_recv;
  a.poll_cq = real_poll_cq;
  // The library stays loaded for the life of the process (its providers keep state).
  return l;
}

}  // namespace

const VerbsApi *verbs_real_api(std::string *why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load_real(); });
  if (!loaded.why.empty()) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

const VerbsApi *verbs_api(std::string *why) {
  const char *adapter = std::getenv("HPU_IB_ADAPTER");
  if (!adapter || !*adapter || std::strcmp(adapter, "libibverbs") == 0) return verbs_real_api(why);
  if (std::strcmp(adapter, "test") == 0) return verbs_test_api();
  fail(HPU_ERROR_CONFIG, "HPU_IB_ADAPTER is \"%s\"; expected libibverbs or test (the in-memory test adapter)",
       adapter);
}

bool verbs_hca_allows(const char *hca, const std::string &name, int port) {
  if (!hca || !*hca) return true;
  bool exclude = false, exact = false;
  if (*hca == '^') exclude = true, ++hca;
  if (*hca == '=') exact = true, ++hca;
  bool listed = false;
  std::string list(hca);
  size_t pos = 0;
  while (pos <= list.size() && !listed) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (item.empty()) continue;
    int want_port = 0;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      want_port = std::atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    bool name_ok = exact ? name == item : name.compare(0, item.size(), item) == 0;
    listed = name_ok && (want_port == 0 || want_port == port);
  }
  return exclude ? !listed : listed;
}

bool verbs_find_port(const VerbsApi &api, const char *hca, VerbsPort *out, std::string *why) {
  int n = 0;
  ibv_device **list = api.get_device_list(&n);
  if (!list || n == 0) {
    if (list) api.free_device_list(list);
    *why = strf("no RDMA device found (%s lists none)", api.name);
    return false;
  }
  std::string seen;
  bool found = false;
  for (int d = 0; d < n && !found; ++d) {
    std::string name = api.get_device_name(list[d]);
    ibv_context *ctx = api.open_device(list[d]);
    if (!ctx) {
      seen += strf("%s%s (cannot open: %s)", seen.empty() ? "" : ", ", name.c_str(), strerror(errno));
      continue;
    }
    ibv_device_attr dev{};
    int ports = api.query_device(ctx, &dev) == 0 ? dev.phys_port_cnt : 0;
    for (int p = 1; p <= ports && !found; ++p) {
      if (!verbs_hca_allows(hca, name, p)) {
        seen += strf("%s%s:%d (excluded by HPU_IB_HCA)", seen.empty() ? "" : ", ", name.c_str(), p);
        continue;
      }
      ibv_port_attr pa{};
      if (api.query_port(ctx, static_cast<uint8_t>(p), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) {
        seen += strf("%s%s:%d (not active)", seen.empty() ? "" : ", ", name.c_str(), p);
        continue;
      }
      out->device = name;
      out->port = p;
      out->mtu = pa.active_mtu;
      out->lid = pa.lid;
      out->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      if (api.query_gid(ctx, static_cast<uint8_t>(p), 0, &out->gid) != 0) std::memset(&out->gid, 0, sizeof out->gid);
      found = true;
    }
    api.close_device(ctx);
  }
  api.free_device_list(list);
  if (!found) *why = strf("no active RDMA port: %s", seen.c_str());
  return found;
}

}  // namespace hpu::comm
