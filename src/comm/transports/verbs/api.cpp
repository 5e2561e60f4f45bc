// The verbs table (libibverbs through dlopen) and port discovery.
#include "comm/transports/verbs/api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

// verbs.h inlines these three: they dispatch through the context's ops table.
int real_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) { return qp->context->ops.post_send(qp, wr, bad); }
int real_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) { return qp->context->ops.post_recv(qp, wr, bad); }
int real_poll_cq(ibv_cq *cq, int n, ibv_wc *wc) { return cq->context->ops.poll_cq(cq, n, wc); }

struct Loaded {
  std::string library;
  VerbsApi api{};
  std::string why;  // empty when loaded
};

template <class F>
void load(Loaded &l, void *lib, const char *symbol, F *&out) {
  out = reinterpret_cast<F *>(dlsym(lib, symbol));
  if (!out && l.why.empty()) l.why = strf("%s has no symbol %s", l.library.c_str(), symbol);
}

void load_library(Loaded &l) {
  void *lib = dlopen(l.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    l.why = strf("%s cannot be loaded (%s); install libibverbs1 (rdma-core)", l.library.c_str(), e ? e : "not found");
    return;
  }
  VerbsApi &a = l.api;
  a.name = l.library.c_str();
  load(l, lib, "ibv_get_device_list", a.get_device_list);
  load(l, lib, "ibv_free_device_list", a.free_device_list);
  load(l, lib, "ibv_get_device_name", a.get_device_name);
  load(l, lib, "ibv_open_device", a.open_device);
  load(l, lib, "ibv_close_device", a.close_device);
  load(l, lib, "ibv_query_device", a.query_device);
  // The exported ibv_query_port fills the leading, compatible part of ibv_port_attr.
  load(l, lib, "ibv_query_port", a.query_port);
  load(l, lib, "ibv_query_gid", a.query_gid);
  a.query_gid_ex = reinterpret_cast<decltype(a.query_gid_ex)>(dlsym(lib, "_ibv_query_gid_ex"));  // optional
  load(l, lib, "ibv_alloc_pd", a.alloc_pd);
  load(l, lib, "ibv_dealloc_pd", a.dealloc_pd);
  load(l, lib, "ibv_reg_mr", a.reg_mr);
  load(l, lib, "ibv_dereg_mr", a.dereg_mr);
  load(l, lib, "ibv_create_cq", a.create_cq);
  load(l, lib, "ibv_destroy_cq", a.destroy_cq);
  load(l, lib, "ibv_create_qp", a.create_qp);
  load(l, lib, "ibv_modify_qp", a.modify_qp);
  load(l, lib, "ibv_destroy_qp", a.destroy_qp);
  load(l, lib, "ibv_get_async_event", a.get_async_event);
  load(l, lib, "ibv_ack_async_event", a.ack_async_event);
  load(l, lib, "ibv_event_type_str", a.event_type_str);
  load(l, lib, "ibv_wc_status_str", a.wc_status_str);
  a.post_send = real_post_send;
  a.post_recv = real_post_recv;
  a.poll_cq = real_poll_cq;
  // The library stays loaded for the life of the process (its providers keep state).
}

}  // namespace

const VerbsApi *verbs_load(const std::string &library, std::string *why) {
  // By name; the entries live as long as the process (the tables point into them).
  static std::mutex mu;
  static auto *loaded = new std::map<std::string, Loaded>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(library);
  if (it == loaded->end()) {
    it = loaded->emplace(library, Loaded{}).first;
    it->second.library = library;
    load_library(it->second);
  }
  if (!it->second.why.empty()) {
    if (why) *why = it->second.why;
    return nullptr;
  }
  return &it->second.api;
}

const VerbsApi *verbs_api(const IbConfig &cfg, std::string *why) { return verbs_load(cfg.library, why); }

bool verbs_hca_allows(const std::string &hca, const std::string &name, int port) {
  if (hca.empty()) return true;
  size_t at = 0;
  bool exclude = false, exact = false;
  if (hca[at] == '^') exclude = true, ++at;
  if (at < hca.size() && hca[at] == '=') exact = true, ++at;
  bool listed = false;
  while (at <= hca.size() && !listed) {
    size_t comma = hca.find(',', at);
    std::string item = hca.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? hca.size() + 1 : comma + 1;
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

namespace {

constexpr uint32_t kGidTypeUnknown = 0xff;  // the library cannot say (no _ibv_query_gid_ex)

bool gid_valid(const ibv_gid &g) {
  for (uint8_t b : g.raw)
    if (b) return true;
  return false;
}
bool gid_ipv4(const ibv_gid &g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}
bool gid_link_local(const ibv_gid &g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

const char *gid_type_name(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "RoCE (version unknown)";
  }
}

// Entry `index` of the port's GID table; false when the index is out of range or unreadable.
bool read_gid(const VerbsApi &api, ibv_context *ctx, int port, int index, ibv_gid *gid, uint32_t *type) {
  if (api.query_gid_ex) {
    ibv_gid_entry e{};
    if (api.query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(index), &e, 0, sizeof e) != 0)
      return false;
    *gid = e.gid;
    *type = e.gid_type;
    return true;
  }
  *type = kGidTypeUnknown;
  return api.query_gid(ctx, static_cast<uint8_t>(port), index, gid) == 0;
}

}  // namespace

std::string describe_gid(const VerbsPort &p) {
  char text[64];
  const ibv_gid &g = p.gid;
  if (gid_ipv4(g))
    snprintf(text, sizeof text, "::ffff:%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  else
    snprintf(text, sizeof text, "%x:%x:%x:%x:%x:%x:%x:%x", g.raw[0] << 8 | g.raw[1], g.raw[2] << 8 | g.raw[3],
             g.raw[4] << 8 | g.raw[5], g.raw[6] << 8 | g.raw[7], g.raw[8] << 8 | g.raw[9], g.raw[10] << 8 | g.raw[11],
             g.raw[12] << 8 | g.raw[13], g.raw[14] << 8 | g.raw[15]);
  return strf("%s %s %s (index %d)", gid_type_name(p.gid_type),
              p.gid_type == IBV_GID_TYPE_IB ? "" : gid_ipv4(g) ? "IPv4" : "IPv6", text, p.gid_index);
}

bool verbs_pick_gid(const VerbsApi &api, ibv_context *ctx, int gid_table_len, const IbConfig &cfg, VerbsPort *port,
                    std::string *why) {
  if (cfg.gid_index >= 0) {
    if (cfg.gid_index >= gid_table_len || !read_gid(api, ctx, port->port, cfg.gid_index, &port->gid, &port->gid_type) ||
        !gid_valid(port->gid))
      fail(HPU_ERROR_CONFIG, "HPU_IB_GID_INDEX=%d: %s port %d has no valid GID there (its table has %d entries)",
           cfg.gid_index, port->device.c_str(), port->port, gid_table_len);
    port->gid_index = cfg.gid_index;
    return true;
  }
  // Rank every valid entry: the wanted family and version first (rank 0), then
  // the family with the other version (1), then anything (2); IPv6 link-local
  // addresses after the others of their rank.
  uint32_t want = cfg.roce_version == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
  int best = -1, best_rank = 1 << 20;
  for (int i = 0; i < gid_table_len; ++i) {
    ibv_gid g;
    uint32_t type;
    if (!read_gid(api, ctx, port->port, i, &g, &type) || !gid_valid(g)) continue;
    bool family = cfg.addr_family == 4 ? gid_ipv4(g) : !gid_ipv4(g);
    bool version = type == want || type == kGidTypeUnknown;
    int rank = (family ? (version ? 0 : 2) : 4) + (cfg.addr_family == 6 && gid_link_local(g) ? 1 : 0);
    if (rank < best_rank) {
      best_rank = rank;
      best = i;
      port->gid = g;
      port->gid_type = type;
    }
  }
  if (best < 0) {
    *why = strf("%s port %d has no valid GID (table of %d entries)", port->device.c_str(), port->port, gid_table_len);
    return false;
  }
  port->gid_index = best;
  if (best_rank > 1)
    HPU_LOG(warn, "comm", "verbs: %s port %d has no %s GID of the IPv%d family; using %s (set HPU_IB_GID_INDEX, "
            "HPU_IB_ROCE_VERSION or HPU_IB_ADDR_FAMILY to choose)", port->device.c_str(), port->port,
            gid_type_name(want), cfg.addr_family, describe_gid(*port).c_str());
  return true;
}

bool verbs_find_ports(const VerbsApi &api, const IbConfig &cfg, std::vector<VerbsPort> *out, std::string *why) {
  out->clear();
  int n = 0;
  ibv_device **list = api.get_device_list(&n);
  if (!list || n == 0) {
    if (list) api.free_device_list(list);
    *why = strf("no RDMA device found (%s lists none)", api.name);
    return false;
  }
  std::string seen;
  auto note = [&](const std::string &what) { seen += (seen.empty() ? "" : ", ") + what; };
  try {
    for (int d = 0; d < n && out->empty(); ++d) {
      std::string name = api.get_device_name(list[d]);
      ibv_context *ctx = api.open_device(list[d]);
      if (!ctx) {
        note(strf("%s (cannot open: %s)", name.c_str(), strerror(errno)));
        continue;
      }
      struct Close {
        const VerbsApi &api;
        ibv_context *ctx;
        ~Close() { api.close_device(ctx); }
      } close{api, ctx};
      ibv_device_attr dev{};
      int ports = api.query_device(ctx, &dev) == 0 ? dev.phys_port_cnt : 0;
      for (int p = 1; p <= ports; ++p) {
        if (!verbs_hca_allows(cfg.hca, name, p)) {
          note(strf("%s:%d (excluded by HPU_IB_HCA)", name.c_str(), p));
          continue;
        }
        ibv_port_attr pa{};
        if (api.query_port(ctx, static_cast<uint8_t>(p), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) {
          note(strf("%s:%d (not active)", name.c_str(), p));
          continue;
        }
        VerbsPort vp;
        vp.device = name;
        vp.port = p;
        vp.mtu = pa.active_mtu;
        vp.lid = pa.lid;
        vp.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        if (!out->empty() && vp.ethernet != out->front().ethernet) {
          note(strf("%s:%d (another link layer than %s:%d)", name.c_str(), p, name.c_str(), out->front().port));
          continue;
        }
        std::string no_gid;
        if (vp.ethernet) {
          if (!verbs_pick_gid(api, ctx, pa.gid_tbl_len, cfg, &vp, &no_gid)) {
            note(no_gid);
            continue;
          }
        } else if (api.query_gid(ctx, static_cast<uint8_t>(p), 0, &vp.gid) != 0) {
          std::memset(&vp.gid, 0, sizeof vp.gid);
        }
        out->push_back(vp);
      }
    }
  } catch (...) {
    api.free_device_list(list);
    throw;
  }
  api.free_device_list(list);
  if (out->empty()) *why = strf("no active RDMA port: %s", seen.c_str());
  return !out->empty();
}

}  // namespace hpu::comm
