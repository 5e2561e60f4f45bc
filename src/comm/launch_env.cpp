// hpuCommInitFromEnv: the launch environment decides the ranks and the
// rendezvous; the process with launch rank 0 runs the root listener there.
#include "comm/launch_env.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "api/api.hpp"
#include "comm/bootstrap_socket.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

const char *value(const GetEnv &get, const char *name) {
  const char *v = get(name);
  return v && *v ? v : nullptr;
}

int parse_int(const char *name, const char *text, int lo, int hi) {
  errno = 0;
  char *end = nullptr;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi)
    fail(HPU_ERROR_CONFIG, "%s is \"%s\"; expected an integer in [%d, %d]", name, text, lo, hi);
  return static_cast<int>(v);
}

// One launcher's variable names.
struct Scheme {
  const char *source, *rank, *size, *local_rank;
};
const Scheme kSchemes[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

void read_rendezvous(const GetEnv &get, LaunchEnv &env) {
  if (const char *id = value(get, "HPU_COMM_ID")) {
    std::string s = id;
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      fail(HPU_ERROR_CONFIG, "HPU_COMM_ID is \"%s\"; expected host:port", id);
    env.host = s.substr(0, colon);
    if (env.host.size() > 2 && env.host.front() == '[' && env.host.back() == ']')
      env.host = env.host.substr(1, env.host.size() - 2);
    env.port = static_cast<uint16_t>(parse_int("the port of HPU_COMM_ID", s.c_str() + colon + 1, 1, 65535));
    env.address_source = "HPU_COMM_ID";
    return;
  }
  const char *addr = value(get, "MASTER_ADDR"), *port = value(get, "MASTER_PORT");
  if (!addr && !port && env.size == 1) return;
  if (!addr)
    fail(HPU_ERROR_CONFIG, "MASTER_ADDR is not set: set MASTER_ADDR and MASTER_PORT (or HPU_COMM_ID=host:port) "
         "to the rendezvous address of the job's first process (%s gave rank %d of %d)", env.source.c_str(),
         env.rank, env.size);
  if (!port)
    fail(HPU_ERROR_CONFIG, "MASTER_PORT is not set: set it beside MASTER_ADDR=%s (or HPU_COMM_ID=host:port)", addr);
  env.host = addr;
  env.port = static_cast<uint16_t>(parse_int("MASTER_PORT", port, 1, 65535));
  env.address_source = "MASTER_ADDR/MASTER_PORT";
}

void read_secret(const GetEnv &get, LaunchEnv &env) {
  if (const char *hex = value(get, "HPU_COMM_SECRET")) {
    if (strlen(hex) != 32) fail(HPU_ERROR_CONFIG, "HPU_COMM_SECRET has %zu characters; expected 32 hex digits",
                                strlen(hex));
    for (int i = 0; i < 16; ++i) {
      char byte[3] = {hex[2 * i], hex[2 * i + 1], 0};
      char *end = nullptr;
      long v = strtol(byte, &end, 16);
      if (*end) fail(HPU_ERROR_CONFIG, "HPU_COMM_SECRET is \"%s\"; expected 32 hex digits", hex);
      env.secret[i] = static_cast<uint8_t>(v);
    }
    env.secret_source = "HPU_COMM_SECRET";
    return;
  }
  // Without an explicit secret every process derives the same one from what the
  // launcher gave all of them. It keeps strangers and other jobs out, not an
  // attacker who can read the job's environment.
  std::string material = strf("hpu-launch/%s/%u/%d", env.host.c_str(), env.port, env.size);
  env.secret_source = "derived from the rendezvous address";
  for (const char *job : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}) {
    if (const char *v = value(get, job)) {
      material += strf("/%s=%s", job, v);
      env.secret_source += strf(" and %s", job);
      break;
    }
  }
  static const uint8_t k0[16] = {'h', 'p', 'u', '-', 'l', 'a', 'u', 'n', 'c', 'h', '-', 'k', 'e', 'y', '-', '0'};
  static const uint8_t k1[16] = {'h', 'p', 'u', '-', 'l', 'a', 'u', 'n', 'c', 'h', '-', 'k', 'e', 'y', '-', '1'};
  uint64_t a = siphash(k0, material.data(), material.size()), b = siphash(k1, material.data(), material.size());
  std::memcpy(env.secret, &a, 8);
  std::memcpy(env.secret + 8, &b, 8);
}

}  // namespace

LaunchEnv read_launch_env(const GetEnv &get) {
  LaunchEnv env;
  const Scheme *found = nullptr;
  for (const Scheme &s : kSchemes) {
    bool rank = value(get, s.rank) || (s.rank == kSchemes[0].rank && value(get, "NODE_RANK"));
    if (rank || value(get, s.size)) {
      found = &s;
      break;
    }
  }
  env.source = "none";
  if (found) {
    env.source = found->source;
    const char *rank = value(get, found->rank);
    const char *size = value(get, found->size);
    if (!size && !value(get, "HPU_WORLD_SIZE"))
      fail(HPU_ERROR_CONFIG, "%s is not set (the %s launch environment sets %s=%s)", found->size, found->source,
           rank ? found->rank : "NODE_RANK", rank ? rank : value(get, "NODE_RANK"));
    if (size) env.size = parse_int(found->size, size, 1, 1 << 20);
    if (const char *lr = value(get, found->local_rank)) env.local_rank = parse_int(found->local_rank, lr, 0, 1 << 20);
    if (rank) {
      env.rank = parse_int(found->rank, rank, 0, INT_MAX);
    } else if (const char *node = value(get, "NODE_RANK")) {
      // Lightning's multi-node variables: processes per node from LOCAL_WORLD_SIZE.
      int node_rank = parse_int("NODE_RANK", node, 0, 1 << 20);
      const char *lws = value(get, "LOCAL_WORLD_SIZE");
      int per_node = lws ? parse_int("LOCAL_WORLD_SIZE", lws, 1, 1 << 20) : 1;
      env.rank = node_rank * per_node + env.local_rank;
    } else if (!value(get, "HPU_RANK")) {
      fail(HPU_ERROR_CONFIG, "%s is not set (the %s launch environment sets %s=%s)", found->rank, found->source,
           found->size, size);
    }
  }
  // Explicit variables win, one by one.
  bool explicit_rank = false;
  if (const char *v = value(get, "HPU_WORLD_SIZE")) {
    env.size = parse_int("HPU_WORLD_SIZE", v, 1, 1 << 20);
    explicit_rank = true;
  }
  if (const char *v = value(get, "HPU_RANK")) {
    env.rank = parse_int("HPU_RANK", v, 0, INT_MAX);
    explicit_rank = true;
  }
  if (const char *v = value(get, "HPU_LOCAL_RANK")) env.local_rank = parse_int("HPU_LOCAL_RANK", v, 0, 1 << 20);
  if (explicit_rank) {
    if (!value(get, "HPU_WORLD_SIZE") && !found)
      fail(HPU_ERROR_CONFIG, "HPU_WORLD_SIZE is not set (HPU_RANK=%s is)", value(get, "HPU_RANK"));
    if (!value(get, "HPU_RANK") && !found)
      fail(HPU_ERROR_CONFIG, "HPU_RANK is not set (HPU_WORLD_SIZE=%s is)", value(get, "HPU_WORLD_SIZE"));
    env.source = found ? strf("HPU_* over %s", found->source) : "HPU_*";
  }
  if (env.rank >= env.size)
    fail(HPU_ERROR_CONFIG, "the process rank %d (from %s) is not below the process count %d", env.rank,
         env.source.c_str(), env.size);
  read_rendezvous(get, env);
  read_secret(get, env);
  return env;
}

UniqueId launch_unique_id(const LaunchEnv &env) {
  UniqueId id = UniqueId::make();
  std::memcpy(id.secret, env.secret, sizeof id.secret);
  Address a = Address::resolve(env.host, env.port, env.address_source.c_str());
  a.to_bytes(id.address);
  id.flags |= UniqueId::kHasAddress;
  return id;
}

}  // namespace hpu::comm

using namespace hpu;
using namespace hpu::comm;

HPU_API hpuStatus_t hpuCommInitFromEnv(hpuComm_t *comms, int ndev, const hpuDevice_t *devs) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(comms != nullptr, "comms is NULL");
  HPU_CHECK_ARG(ndev >= 1 && ndev <= 4096, "ndev is %d; expected 1 to 4096", ndev);
  HPU_CHECK_ARG(devs != nullptr, "devs is NULL");
  LaunchEnv env = read_launch_env([](const char *name) { return getenv(name); });
  long long world = static_cast<long long>(env.size) * ndev;
  if (world > INT_MAX) fail(HPU_ERROR_CONFIG, "%d processes x %d devices is too many ranks", env.size, ndev);
  HPU_LOG(info, "comm", "launch environment: %s, process %d of %d (local %d), %d device(s) each: ranks %d..%d of %lld%s",
          env.source.c_str(), env.rank, env.size, env.local_rank, ndev, env.rank * ndev, env.rank * ndev + ndev - 1,
          world,
          env.host.empty() ? "" : strf("; rendezvous %s:%u from %s; secret %s", env.host.c_str(), env.port,
                                       env.address_source.c_str(), env.secret_source.c_str()).c_str());
  if (env.size == 1 && env.host.empty()) {
    hpuStatus_t s = hpuCommInitAll(comms, ndev, devs);
    if (s != HPU_SUCCESS) throw Error(s, api::last_error());
    return HPU_SUCCESS;
  }
  UniqueId id = launch_unique_id(env);
  if (env.rank == 0) {
    Address at = Address::from_bytes(id.address);
    std::string what = strf("rendezvous listener (%s %s:%u)", env.address_source.c_str(), env.host.c_str(), env.port);
    try {
      socket_root_start(id, &at, what.c_str());
    } catch (const Error &e) {
      if (e.status() == HPU_ERROR_ADDRESS_IN_USE) throw;
      // The address is not one of this host's (NAT, a name for a proxy): listen on
      // every interface at that port instead.
      HPU_LOG(warn, "comm", "%s; listening on every interface at port %u instead", e.what(), env.port);
      Address any = Address::resolve(at.ss.ss_family == AF_INET6 ? "::" : "0.0.0.0", env.port, what.c_str());
      UniqueId bound = id;
      socket_root_start(bound, &any, what.c_str());
    }
  }
  hpuUniqueId_t pub = id.to_public();
  std::vector<hpuComm_t> made(static_cast<size_t>(ndev), nullptr);
  std::vector<hpuStatus_t> status(static_cast<size_t>(ndev), HPU_SUCCESS);
  std::vector<std::string> message(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i)
    threads.emplace_back([&, i] {
      status[i] = hpuCommInitRank(&made[i], devs[i], static_cast<int>(world), &pub, env.rank * ndev + i);
      if (status[i] != HPU_SUCCESS) message[i] = api::last_error();
    });
  for (auto &t : threads) t.join();
  int worst = -1;
  for (int i = 0; i < ndev; ++i)  // the root cause first: an abort or timeout is often a consequence
    if (status[i] != HPU_SUCCESS && (worst < 0 || status[worst] == HPU_ERROR_ABORTED)) worst = i;
  if (worst >= 0) {
    for (hpuComm_t c : made) hpuCommDestroy(c);
    throw Error(status[worst], strf("device %d (rank %d): %s", worst, env.rank * ndev + worst, message[worst].c_str()));
  }
  for (int i = 0; i < ndev; ++i) comms[i] = made[i];
  HPU_API_END
}
