// Call kinds, headers and the mismatch check.
#include "comm/wire.hpp"

#include <hpu/comm.h>

#include <cinttypes>

#include "core/error.hpp"
#include "kernels/dtype.hpp"

namespace hpu::comm {

namespace {

struct CallInfo {
  const char *name;
  bool has_root, has_redop;
};

const CallInfo *info(uint32_t coll) {
  switch (coll) {
#define HPU_COMM_CALL_(name, number, root, redop) \
  case number: {                                 \
    static const CallInfo c{#name, root, redop}; \
    return &c;                                   \
  }
    HPU_COMM_CALLS(HPU_COMM_CALL_)
#undef HPU_COMM_CALL_
  }
  return nullptr;
}

const char *redop_name(uint32_t op) {
  static const char *const names[HPU_NUM_RED_OPS] = {"sum", "prod", "min", "max", "avg"};
  return op < HPU_NUM_RED_OPS ? names[op] : "?";
}

}  // namespace

const char *coll_name(CollKind kind) {
  const CallInfo *c = info(static_cast<uint32_t>(kind));
  return c ? c->name : "?";
}

bool is_collective(const OpHeader &h) {
  auto k = static_cast<CollKind>(h.coll);
  return k != CollKind::send && k != CollKind::recv && k != CollKind::none;
}

std::string describe(const OpHeader &h) {
  const CallInfo *c = info(h.coll);
  std::string s = strf("%s #%" PRIu64 " (count %" PRIu64 ", %s", c ? c->name : "?", h.seq, h.count,
                       kernels::dtype_name(static_cast<hpuDataType_t>(h.dtype)));
  if (c && c->has_redop) s += strf(", %s", redop_name(h.redop));
  if (c && c->has_root) s += strf(", root %d", h.root);
  return s + ")";
}

std::string header_mismatch(const OpHeader &mine, int self, const OpHeader &theirs, int peer) {
  auto mk = static_cast<CollKind>(mine.coll), tk = static_cast<CollKind>(theirs.coll);
  bool same = mine.seq == theirs.seq && mine.dtype == theirs.dtype && mine.count == theirs.count;
  if (mk == CollKind::recv && tk == CollKind::send)
    same = same && mine.root == theirs.root;
  else
    same = same && mine.coll == theirs.coll && mine.root == theirs.root && mine.redop == theirs.redop;
  if (same) return "";
  return strf("mismatched calls: rank %d called %s but rank %d called %s", self, describe(mine).c_str(), peer,
              describe(theirs).c_str());
}

}  // namespace hpu::comm
