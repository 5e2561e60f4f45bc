// Launch environments: which process of how many this is, and where the group
// meets, from the variables launchers already set (hpuCommInitFromEnv).
//
//   process rank / count / local rank, first found wins, each HPU_* variable
//   overriding its launcher's value:
//     HPU_RANK, HPU_WORLD_SIZE, HPU_LOCAL_RANK          (explicit)
//     RANK or NODE_RANK, WORLD_SIZE, LOCAL_RANK          (torchrun, Lightning)
//     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK           (Open MPI's mpirun)
//     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID          (Slurm's srun)
//   rendezvous: HPU_COMM_ID=host:port, else MASTER_ADDR + MASTER_PORT.
//   group secret: HPU_COMM_SECRET (32 hex digits), else derived from the
//   rendezvous address and the job's id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID,
//   OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE) when the launcher sets one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "comm/bootstrap.hpp"

namespace hpu::comm {

struct LaunchEnv {
  int rank = 0;        // this process among the job's processes
  int size = 1;        // processes in the job
  int local_rank = 0;  // this process among those of its host
  std::string source;  // "HPU_*", "torchrun", "Open MPI", "Slurm", or "none" (a single process)
  std::string host;    // rendezvous host and port ("" when size == 1 and none is given)
  uint16_t port = 0;
  std::string address_source;  // "HPU_COMM_ID" or "MASTER_ADDR/MASTER_PORT"
  std::string secret_source;   // "HPU_COMM_SECRET", "derived from ...", for the log
  uint8_t secret[16] = {};
};

using GetEnv = std::function<const char *(const char *)>;

// Reads the environment; throws HPU_ERROR_CONFIG naming a missing or malformed
// variable and its value.
LaunchEnv read_launch_env(const GetEnv &get);

// The unique id every process of the job derives alike: the secret and the
// rendezvous address (resolved).
UniqueId launch_unique_id(const LaunchEnv &env);

}  // namespace hpu::comm
