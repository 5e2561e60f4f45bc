#include "comm/group.hpp"

#include <functional>
#include <vector>

#include "core/error.hpp"

namespace hpu::comm {

namespace {

struct Entry {
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<Stream> stream;
  bool p2p;
  P2POp op;  // a send or receive
  OpHeader header;  // else a collective on these buffers
  const void *send;
  void *recv;
};

struct Group {
  int depth = 0;
  std::vector<Entry> entries;
};

thread_local Group t_group;

}  // namespace

bool in_group() { return t_group.depth > 0; }

void group_start() { ++t_group.depth; }

void group_end() {
  if (t_group.depth == 0) fail(HPU_ERROR_INVALID_USAGE, "no group is open on this thread (hpuGroupStart first)");
  if (--t_group.depth > 0) return;
  std::vector<Entry> entries;
  entries.swap(t_group.entries);
  Error first(HPU_SUCCESS, "");
  auto attempt = [&](const std::function<void()> &fn) {
    try {
      fn();
    } catch (const Error &e) {
      if (first.status() == HPU_SUCCESS) first = e;
    }
  };
  std::vector<bool> issued(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (issued[i]) continue;
    const Entry &e = entries[i];
    if (!e.p2p) {
      attempt([&] { e.comm->enqueue(*e.stream, e.header, e.send, e.recv); });
      continue;
    }
    std::vector<P2POp> ops;  // every send and receive of this (comm, stream)
    for (size_t j = i; j < entries.size(); ++j)
      if (!issued[j] && entries[j].p2p && entries[j].comm == entries[i].comm &&
          entries[j].stream == entries[i].stream) {
        ops.push_back(entries[j].op);
        issued[j] = true;
      }
    attempt([&] { entries[i].comm->enqueue_p2p(*entries[i].stream, std::move(ops)); });
  }
  if (first.status() != HPU_SUCCESS) throw first;
}

void issue_or_record(std::shared_ptr<Communicator> comm, std::shared_ptr<Stream> stream, const OpHeader &header,
                     const void *send, void *recv) {
  if (!in_group()) return comm->enqueue(*stream, header, send, recv);
  t_group.entries.push_back({std::move(comm), std::move(stream), false, {}, header, send, recv});
}

void issue_or_record_p2p(std::shared_ptr<Communicator> comm, std::shared_ptr<Stream> stream, P2POp op) {
  if (!in_group()) return comm->enqueue_p2p(*stream, {op});
  t_group.entries.push_back({std::move(comm), std::move(stream), true, op, {}, nullptr, nullptr});
}

}  // namespace hpu::comm
