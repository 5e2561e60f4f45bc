// Launch environments: which process of how many this is, and where the group
// meets, from the variables launchers already set (hpuCommInitFromEnv).
//
//   process rank / count / local rank, first found wins, each HPU_* variable
//   overriding its launcher's value:
//     HPU_RANK, HPU_WORLD_SIZE, HPU_LOCAL_RANK          (explicit)
//     RANK or NODE_RANK, WORLD_SIZE, LOCAL_RANK          (torchrun, Lightning)
//     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK           (Open MPI's mpirun)
//     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID          (Slurm's srun)
//   WORLD_SIZE and LOCAL_WORLD_SIZE count ranks, as torchrun and Lightning
//   mean them (one device per process there): with ndev devices per process
//   they are divided by ndev; every other count and rank counts processes.
//   rendezvous: HPU_COMM_ID=host:port, else MASTER_ADDR + MASTER_PORT; where
//   launch rank 0 listens: that address, or loopback when the launcher says
//   every process is on this host (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE
//   or SLURM_STEP_NUM_NODES), or what HPU_COMM_LISTEN names ("any": every
//   interface).
//   group secret: HPU_COMM_SECRET (32 hex digits), else the user's secret file
//   (secret_file_path), made with random content on first use. Nothing a
//   stranger can see (addresses, counts, job ids) goes into it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/socket/address.hpp"

namespace hpu::comm {

struct LaunchEnv {
  int rank = 0;        // this process among the job's processes
  int size = 1;        // processes in the job
  int local_rank = 0;  // this process among those of its host
  std::string source;  // "HPU_*", "torchrun", "Open MPI", "Slurm", or "none" (a single process)
  std::string host;    // rendezvous host and port ("" when size == 1 and none is given)
  uint16_t port = 0;
  std::string address_source;  // "HPU_COMM_ID" or "MASTER_ADDR/MASTER_PORT"
  std::string local_source;    // the variable that says every process is on this host; "" = not known
  std::string listen;          // HPU_COMM_LISTEN: "" (the rendezvous address), "any", or a host to bind
  std::string secret_source;   // "HPU_COMM_SECRET" or the secret file's path, for the log
  uint8_t secret[16] = {};
};

using GetEnv = std::function<const char *(const char *)>;

// Reads the environment of a process of `ndev` devices; throws
// HPU_ERROR_CONFIG naming a missing or malformed variable and its value.
LaunchEnv read_launch_env(const GetEnv &get, int ndev);

// The unique id every process of the job derives alike: the secret and the
// rendezvous address (resolved; loopback when every process is on this host
// and HPU_COMM_LISTEN is not set).
UniqueId launch_unique_id(const LaunchEnv &env);

// Where launch rank 0 listens for the job of `id`: the id's address, every
// interface (HPU_COMM_LISTEN=any) or the host HPU_COMM_LISTEN names, at the
// id's port. The address is logged; every interface at level info.
Address launch_listen_address(const LaunchEnv &env, const UniqueId &id);

// launch_unique_id, with the rendezvous running: in the process of launch rank
// 0 the root listener is started at launch_listen_address before this
// returns. Throws as socket_root_start does; HPU_ERROR_CONFIG, saying where
// the listener must run, when the rendezvous address is not this host's.
UniqueId launch_rendezvous(const LaunchEnv &env);

// The user's secret file: $XDG_CONFIG_HOME/hpu/secret, else
// $HOME/.config/hpu/secret (HOME from the password database when unset).
std::string secret_file_path(const GetEnv &get);

// Reads the 16-byte secret (32 hex digits) in `path`, creating the file first,
// with mode 0600 and random content, when it does not exist: written under a
// temporary name and linked into place, so that processes creating it at once
// all read the one that won. Throws HPU_ERROR_CONFIG naming the path when the
// file is readable by group or others (with its mode), owned by another user,
// not a regular file or malformed; HPU_ERROR_IO when it cannot be made.
// *created tells whether this call made it.
void read_secret_file(const std::string &path, uint8_t secret[16], bool *created);

}  // namespace hpu::comm
