// Process configuration: defaults, then the JSON file named by HPU_CONFIG, then
// environment variables (environment beats file beats defaults).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/log.hpp"

namespace hpu {

// The verbs transport (HPU_IB_* / the "comm.ib" object of HPU_CONFIG).
struct IbConfig {
  std::string hca;                     // HPU_IB_HCA / "hca": device and port filter, as NCCL_IB_HCA; empty = all
  // HPU_IB_LIBRARY / "library": the libibverbs dlopen loads, a file name or a path
  std::string library = "libibverbs.so.1";
  int gid_index = -1;                  // HPU_IB_GID_INDEX / "gid_index": RoCE GID table index; -1 = chosen
  int roce_version = 2;                // HPU_IB_ROCE_VERSION / "roce_version": 1 or 2, for the chosen GID
  int addr_family = 4;                 // HPU_IB_ADDR_FAMILY / "addr_family": 4 (AF_INET) or 6 (AF_INET6)
  int qps_per_port = 1;                // HPU_IB_QPS_PER_PORT / "qps_per_port": QPs per peer and port, 1..16
  int timeout = 14;                    // HPU_IB_TIMEOUT / "timeout": ACK timeout 4.096 us * 2^n, 1..31
  int retry_cnt = 7;                   // HPU_IB_RETRY_CNT / "retry_cnt": 0..7
};

struct CommConfig {
  double timeout_seconds = 30.0;  // HPU_COMM_TIMEOUT / "timeout"
  std::string transport;          // HPU_TRANSPORT / "transport"; empty = by locality
  std::string algo;               // HPU_ALGO / "algo"; empty = by size and rank count
  IbConfig ib;                    // "ib"
};

struct Config {
  int num_devices = 8;                // HPU_NUM_DEVICES / "num_devices"
  std::vector<int> visible_devices;   // HPU_VISIBLE_DEVICES; empty = all
  std::string profile = "gaudi2";     // HPU_DEVICE_PROFILE / "profile"
  uint64_t device_memory = 0;         // HPU_DEVICE_MEMORY; 0 = the profile's capacity
  double memory_fraction = 1.0;       // HPU_MEMORY_FRACTION
  LogLevel log_level = LogLevel::warn;  // HPU_LOG_LEVEL / "log_level"
  std::string log_file;               // HPU_LOG_FILE / "log_file"; empty = stderr
  int num_threads = 0;                // HPU_NUM_THREADS: compute budget; 0 = CPUs available
  CommConfig comm;

  // Capacity of one device in bytes (device_memory, or the profile's HBM size).
  uint64_t capacity() const;
};

// Reads defaults, HPU_CONFIG and the environment. Throws Error(HPU_ERROR_CONFIG)
// naming the variable or key and the bad value.
Config load_config();

// Capacity of a named profile in bytes; 0 for an unknown name.
uint64_t profile_capacity(const std::string &profile);

// "16GiB", "512 MiB", "1.5G", "1073741824" -> bytes. False when malformed.
bool parse_bytes(const std::string &text, uint64_t *bytes);

// Duration in seconds: "30", "2.5", "500ms", "2s". False when malformed or < 0.
bool parse_seconds(const std::string &text, double *seconds);

}  // namespace hpu
