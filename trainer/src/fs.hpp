// Small file-system helpers (POSIX).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpu::detail {

// mkdir -p; hpu::Error (HPU_ERROR_IO) naming the path on failure.
void make_dirs(const std::string &path);
bool exists(const std::string &path);
std::string parent_dir(const std::string &path);
// Writes `data` to `path` atomically: a temporary file in the same folder,
// fsync, rename over `path`, fsync of the folder. `fail_after` < size makes the
// write stop after that many bytes and fail as a full disk would (fault
// injection); `path` is then untouched and no temporary file remains.
void write_file_atomic(const std::string &path, const void *data, size_t size, size_t fail_after = SIZE_MAX);
// Removes from `dir` the regular files named "<name><ext>.tmp.XXXXXX" (six
// letters or digits): temporaries of write_file_atomic whose process was killed
// before the rename. Returns the names removed; a missing folder has none.
std::vector<std::string> remove_stale_temporaries(const std::string &dir, const std::string &ext);
// Reads a whole file; HPU_ERROR_NOT_FOUND or HPU_ERROR_IO naming the path.
std::string read_file(const std::string &path);

}  // namespace hpu::detail
