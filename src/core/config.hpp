// Process configuration: defaults, then the JSON file named by HPU_CONFIG, then
// environment variables (environment beats file beats defaults). Every HPU_*
// setting is a row of one table (kSettings in config.cpp: variable, file key,
// default, range, one-line doc); hpu(7)'s ENVIRONMENT section documents the
// same rows, and tests/unit/config_table.cpp checks that they agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/log.hpp"

namespace hpu {

// The verbs transport (HPU_IB_* / the "comm.ib" object of HPU_CONFIG).
struct IbConfig {
  std::string hca;                     // HPU_IB_HCA: device and port filter, as NCCL_IB_HCA; empty = all
  std::string library = "libibverbs.so.1";  // HPU_IB_LIBRARY: the libibverbs dlopen loads
  int gid_index = -1;                  // HPU_IB_GID_INDEX: RoCE GID table index; -1 = chosen
  int roce_version = 2;                // HPU_IB_ROCE_VERSION: for the chosen GID
  int addr_family = 4;                 // HPU_IB_ADDR_FAMILY: 4 (AF_INET) or 6 (AF_INET6)
  int qps_per_port = 1;                // HPU_IB_QPS_PER_PORT: QPs per peer and port
  int timeout = 14;                    // HPU_IB_TIMEOUT: ACK timeout 4.096 us * 2^n
  int retry_cnt = 7;                   // HPU_IB_RETRY_CNT
};

struct CommConfig {
  double timeout_seconds = 30.0;  // HPU_COMM_TIMEOUT
  std::string transport;          // HPU_TRANSPORT; empty = by locality
  std::string algo;               // HPU_ALGO; empty = by size and rank count
  int tcp_lanes = 2;              // HPU_TCP_LANES
  std::string socket_ifname;      // HPU_SOCKET_IFNAME; empty = the first interface up and not loopback
  // hpuCommInitFromEnv's settings, as text: it checks them and names the
  // variable in its errors. Empty = unset (the launcher's variables apply).
  std::string rank;               // HPU_RANK
  std::string world_size;         // HPU_WORLD_SIZE
  std::string local_rank;         // HPU_LOCAL_RANK
  std::string id;                 // HPU_COMM_ID
  std::string secret;             // HPU_COMM_SECRET
  std::string listen;             // HPU_COMM_LISTEN
  IbConfig ib;
};

// An autocast op list file (PT_HPU_AUTOCAST_*_OPS_LIST or its older name).
struct OpListFile {
  std::string path;    // empty = Habana's default list
  std::string source;  // where the path was set: the variable, or "<file>: <key>"
};

struct Config {
  int num_devices = 8;                // HPU_NUM_DEVICES
  std::vector<int> visible_devices;   // HPU_VISIBLE_DEVICES; empty = all
  std::string profile = "gaudi2";     // HPU_DEVICE_PROFILE
  uint64_t device_memory = 0;         // HPU_DEVICE_MEMORY; 0 = the profile's capacity
  double memory_fraction = 1.0;       // HPU_MEMORY_FRACTION
  LogLevel log_level = LogLevel::warn;  // HPU_LOG_LEVEL
  std::string log_file;               // HPU_LOG_FILE; empty = stderr
  int num_threads = 0;                // HPU_NUM_THREADS: compute budget; 0 = CPUs available
  std::string kernel_isa;             // HPU_KERNEL_ISA; empty = the best this CPU has
  std::string trace_file;             // HPU_PROFILE; empty = the profiler is off until started
  bool smi = true;                    // HPU_SMI
  double smi_interval = 0.5;          // HPU_SMI_INTERVAL, seconds
  std::string fault_inject;           // HPU_FAULT_INJECT
  OpListFile lower_precision_ops;     // PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST (LOWER_LIST)
  OpListFile fp32_ops;                // PT_HPU_AUTOCAST_FP32_OPS_LIST (FP32_LIST)
  CommConfig comm;
  // The settings given a value, by variable: {the text, where it came from
  // (the variable, or "HPU_CONFIG=<file>: <key>")}; hpuConfigGet reports them.
  std::map<std::string, std::pair<std::string, std::string>> given;

  // Capacity of one device in bytes (device_memory, or the profile's HBM size).
  uint64_t capacity() const;

  // The text of a string setting of hpuCommInitFromEnv by its variable
  // (HPU_RANK, HPU_COMM_ID, ...); nullptr when unset or not one of them.
  const char *launch_value(const char *variable) const;
};

// When a setting is read: at initialisation (config()), or each time it is
// used (config_now(): the file's value from initialisation, overridden by the
// environment of that moment), for settings a program or test may set between
// two uses, such as a communicator's rank.
enum class ReadAt { init, use };

// One row of the table of settings.
struct Setting {
  const char *variable;  // the environment variable
  const char *key;       // its key in the HPU_CONFIG file ("comm.ib.hca"); nullptr: the file cannot set it
  const char *type;      // integer, number, size, duration, name, text, list, path, switch, removed
  const char *fallback;  // the default as hpu(7) states it ("Default: <fallback>"); "" = none stated
  const char *range;     // the values accepted, as the error for a bad one says "expected <range>"
  const char *doc;       // one line
  ReadAt read_at;
  // Stores the value in the Config; false when it is out of range, then the
  // error names the variable or key, *bad (the value, or the item of a list
  // that is wrong) and the range.
  bool (*set)(Config &c, const std::string &value, const std::string &where, std::string *bad);
  const char *older;     // an older name of the variable, read when it is unset; nullptr = none
};

// Every setting, in hpu(7)'s order.
const std::vector<Setting> &settings();

// The row of a setting named by its variable, its older variable or its
// HPU_CONFIG key; nullptr when none has that name.
const Setting *find_setting(const std::string &name);

// Variables libhpu reads that are not settings: the launcher's (torchrun's,
// Open MPI's, Slurm's RANK, MASTER_ADDR, ... read where hpuCommInitFromEnv
// reads its environment, comm/launch_env.cpp) and those hpu(7) documents
// beside the settings (HOME, XDG_CONFIG_HOME: the secret file's folder).
const std::vector<const char *> &documented_foreign_variables();

// Reads defaults, HPU_CONFIG and the environment. Throws Error(HPU_ERROR_CONFIG)
// naming the variable or key and the bad value.
Config load_config();

// config() (the defaults before initialisation) with the ReadAt::use settings
// read again from the environment. Throws like load_config().
Config config_now();

// The value of a setting's variable in the environment; nullptr when unset or
// empty (an empty value counts as unset).
const char *setting_from_environment(const char *variable);

// Capacity of a named profile in bytes; 0 for an unknown name.
uint64_t profile_capacity(const std::string &profile);

// "16GiB", "512 MiB", "1.5G", "1073741824" -> bytes. False when malformed.
bool parse_bytes(const std::string &text, uint64_t *bytes);

// Duration in seconds: "30", "2.5", "500ms", "2s". False when malformed or < 0.
bool parse_seconds(const std::string &text, double *seconds);

}  // namespace hpu
