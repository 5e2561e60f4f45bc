// Launch environments: the ranks, the rendezvous and the secret from the
// launcher's variables; the process with launch rank 0 runs the root listener.
#include "comm/bootstrap/launch_env.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "core/error.hpp"
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

// 32 hex digits (then only white space) into 16 bytes; `what` names the source.
// Messages never quote the secret.
void parse_secret(const char *what, const std::string &text, uint8_t out[16]) {
  size_t end = text.find_last_not_of(" \t\r\n") + 1;
  if (end != 32) fail(HPU_ERROR_CONFIG, "%s has %zu characters; expected 32 hex digits", what, end);
  for (size_t i = 0; i < 32; ++i)
    if (!isxdigit(static_cast<unsigned char>(text[i])))
      fail(HPU_ERROR_CONFIG, "%s is not 32 hex digits (character %zu is not one)", what, i + 1);
  for (size_t i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
}

void read_secret(const GetEnv &get, LaunchEnv &env) {
  if (const char *hex = value(get, "HPU_COMM_SECRET")) {
    parse_secret("HPU_COMM_SECRET", hex, env.secret);
    env.secret_source = "HPU_COMM_SECRET";
    return;
  }
  std::string path = secret_file_path(get);
  bool created = false;
  read_secret_file(path, env.secret, &created);
  env.secret_source = path;
  if (created) HPU_LOG(info, "comm", "made %s with a new random secret (mode 0600)", path.c_str());
}

// The launcher's word that every process of the job runs on this host: its
// count of processes on this host equals the job's.
// LOCAL_WORLD_SIZE counts ranks (ndev per process), Open MPI's processes.
void read_locality(const GetEnv &get, LaunchEnv &env, int ndev) {
  const std::pair<const char *, int> counts[] = {{"LOCAL_WORLD_SIZE", ndev}, {"OMPI_COMM_WORLD_LOCAL_SIZE", 1}};
  for (const auto &[name, per_process] : counts)
    if (const char *v = value(get, name))
      if (parse_int(name, v, 1, 1 << 20) == env.size * per_process) {
        env.local_source = strf("%s=%s", name, v);
        return;
      }
  if (const char *v = value(get, "SLURM_STEP_NUM_NODES"))
    if (parse_int("SLURM_STEP_NUM_NODES", v, 1, 1 << 20) == 1) env.local_source = "SLURM_STEP_NUM_NODES=1";
}

bool is_loopback(const Address &a) {
  if (a.ss.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in &>(a.ss).sin_addr.s_addr) >> 24) == 127;
  return a.ss.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6 &>(a.ss).sin6_addr);
}

}  // namespace

LaunchEnv read_launch_env(const GetEnv &get, int ndev) {
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
    if (size && found == &kSchemes[0] && !value(get, "HPU_WORLD_SIZE")) {
      // torchrun's and Lightning's WORLD_SIZE counts ranks: ndev per process.
      if (env.size % ndev != 0)
        fail(HPU_ERROR_CONFIG, "WORLD_SIZE is %d, not a multiple of the %d devices of this process (WORLD_SIZE "
             "counts ranks: processes x devices)", env.size, ndev);
      env.size /= ndev;
    }
    if (const char *lr = value(get, found->local_rank)) env.local_rank = parse_int(found->local_rank, lr, 0, 1 << 20);
    if (rank) {
      env.rank = parse_int(found->rank, rank, 0, INT_MAX);
    } else if (const char *node = value(get, "NODE_RANK")) {
      // Lightning's multi-node variables: processes per node from LOCAL_WORLD_SIZE.
      int node_rank = parse_int("NODE_RANK", node, 0, 1 << 20);
      // LOCAL_WORLD_SIZE counts ranks too.
      const char *lws = value(get, "LOCAL_WORLD_SIZE");
      int per_node = lws ? parse_int("LOCAL_WORLD_SIZE", lws, 1, 1 << 20) : ndev;
      if (per_node % ndev != 0)
        fail(HPU_ERROR_CONFIG, "LOCAL_WORLD_SIZE is %d, not a multiple of the %d devices of this process "
             "(LOCAL_WORLD_SIZE counts ranks: processes x devices)", per_node, ndev);
      per_node /= ndev;
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
  if (env.host.empty()) return env;  // one process alone: no rendezvous, no secret
  read_locality(get, env, ndev);
  if (const char *v = value(get, "HPU_COMM_LISTEN")) env.listen = v;
  read_secret(get, env);
  return env;
}

UniqueId launch_unique_id(const LaunchEnv &env) {
  UniqueId id = UniqueId::make();
  std::memcpy(id.secret, env.secret, sizeof id.secret);
  Address a = Address::resolve(env.host, env.port, env.address_source.c_str());
  if (!env.local_source.empty() && env.listen.empty() && !is_loopback(a))
    a = Address::resolve(a.ss.ss_family == AF_INET6 ? "::1" : "127.0.0.1", env.port, "loopback");
  a.to_bytes(id.address);
  id.flags |= UniqueId::kHasAddress;
  return id;
}

Address launch_listen_address(const LaunchEnv &env, const UniqueId &id) {
  Address at = Address::from_bytes(id.address);
  if (env.listen.empty()) {
    if (!env.local_source.empty() && is_loopback(at))
      HPU_LOG(info, "comm", "every process is on this host (%s): the rendezvous listens on loopback only, at %s",
              env.local_source.c_str(), at.str().c_str());
    return at;
  }
  if (env.listen == "any") {
    at = Address::resolve(at.ss.ss_family == AF_INET6 ? "::" : "0.0.0.0", env.port, "HPU_COMM_LISTEN");
    HPU_LOG(info, "comm", "HPU_COMM_LISTEN=any: the rendezvous listens on every interface, at %s; any host that "
            "reaches it may try to join, and only processes that know the secret (%s) get in",
            at.str().c_str(), env.secret_source.c_str());
    return at;
  }
  return Address::resolve(env.listen, env.port, "HPU_COMM_LISTEN");
}

std::string secret_file_path(const GetEnv &get) {
  const char *xdg = value(get, "XDG_CONFIG_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/hpu/secret";
  const char *home = value(get, "HOME");
  if (!home) {
    passwd pw, *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir)
      return std::string(found->pw_dir) + "/.config/hpu/secret";
    fail(HPU_ERROR_CONFIG, "neither HPU_COMM_SECRET nor HOME is set, and user %u has no home directory: set "
         "HPU_COMM_SECRET to 32 hex digits, the same in every process of the job", geteuid());
  }
  return std::string(home) + "/.config/hpu/secret";
}

namespace {

// Makes `dir` (mode 0700) and its missing parents.
void make_dirs(const std::string &dir) {
  for (size_t at = 1;; ++at) {
    at = dir.find('/', at);
    std::string part = dir.substr(0, at);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      fail(HPU_ERROR_IO, "cannot make directory %s for the secret file: %s", part.c_str(), strerror(errno));
    if (at == std::string::npos) return;
  }
}

// Writes a new random secret into a file of its own and links it to `path`
// unless `path` exists by then (link never replaces a file).
void create_secret_file(const std::string &path) {
  make_dirs(path.substr(0, path.rfind('/')));
  uint8_t bytes[16];
  random_bytes(bytes, sizeof bytes);
  std::string text;
  for (uint8_t b : bytes) text += strf("%02x", b);
  text += "\n";
  uint64_t tag;
  random_bytes(&tag, sizeof tag);
  std::string temp = strf("%s.%d.%016llx", path.c_str(), static_cast<int>(getpid()),
                          static_cast<unsigned long long>(tag));
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail(HPU_ERROR_IO, "cannot make the secret file %s: %s", temp.c_str(), strerror(errno));
  bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  int e = errno;
  close(fd);
  int linked = written ? link(temp.c_str(), path.c_str()) : -1;
  if (linked != 0 && written) e = errno;
  unlink(temp.c_str());
  if (!written) fail(HPU_ERROR_IO, "cannot write the secret file %s: %s", temp.c_str(), strerror(e));
  if (linked != 0 && e != EEXIST) fail(HPU_ERROR_IO, "cannot make the secret file %s: %s", path.c_str(), strerror(e));
}

}  // namespace

void read_secret_file(const std::string &path, uint8_t secret[16], bool *created) {
  *created = false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    create_secret_file(path);
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    *created = true;
  }
  if (fd < 0) fail(HPU_ERROR_IO, "cannot open the secret file %s: %s", path.c_str(), strerror(errno));
  struct stat st;
  std::string text(64, '\0');
  ssize_t n = fstat(fd, &st) == 0 ? read(fd, text.data(), text.size()) : -1;
  int e = errno;
  close(fd);
  if (n < 0) fail(HPU_ERROR_IO, "cannot read the secret file %s: %s", path.c_str(), strerror(e));
  const char *fix = "set HPU_COMM_SECRET instead, or remove the file to have a new one made";
  if (!S_ISREG(st.st_mode)) fail(HPU_ERROR_CONFIG, "the secret file %s is not a regular file; %s", path.c_str(), fix);
  if (st.st_uid != geteuid())
    fail(HPU_ERROR_CONFIG, "the secret file %s is owned by user %u, not by this user (%u); %s", path.c_str(),
         st.st_uid, geteuid(), fix);
  if (st.st_mode & 077)
    fail(HPU_ERROR_CONFIG, "the secret file %s has mode %04o: others than its owner may read or change it; run "
         "chmod 600 %s if nobody else has seen it, else %s", path.c_str(), st.st_mode & 07777, path.c_str(), fix);
  text.resize(static_cast<size_t>(n));
  parse_secret(strf("the secret file %s", path.c_str()).c_str(), text, secret);
}

UniqueId launch_rendezvous(const LaunchEnv &env) {
  UniqueId id = launch_unique_id(env);
  if (env.rank != 0) return id;
  Address at = launch_listen_address(env, id);
  std::string what = strf("rendezvous listener (%s %s:%u)", env.listen.empty() ? env.address_source.c_str()
                          : "HPU_COMM_LISTEN", env.listen.empty() ? env.host.c_str() : env.listen.c_str(), env.port);
  try {
    // The others connect to the rendezvous address; this process to where
    // it listens, or for every interface, to the rendezvous address too, so
    // that its connection shows the interface its transports offer.
    UniqueId bound = id;
    socket_root_start(bound, &at, what.c_str());
    if (env.listen != "any") id = bound;
  } catch (const Error &e) {
    if (e.status() != HPU_ERROR_CONFIG || !env.listen.empty()) throw;
    fail(HPU_ERROR_CONFIG, "%s; the process of launch rank 0 must run on the host the rendezvous address names, or "
         "HPU_COMM_LISTEN name where it listens (an address of this host, or \"any\" for every interface)",
         e.what());
  }
  return id;
}

}  // namespace hpu::comm
