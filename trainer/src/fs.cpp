#include "fs.hpp"

#include "error.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hpu::detail {

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string parent_dir(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void make_dirs(const std::string &path) {
  if (path.empty() || exists(path)) return;
  std::string parent = parent_dir(path);
  if (parent != path) make_dirs(parent);
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST)
    fail(HPU_ERROR_IO, "cannot create folder %s: %s", path.c_str(), std::strerror(errno));
}

namespace {

// write_file_atomic's temporary file: "<path>.tmp." and mkstemp's six letters.
constexpr char kTempMark[] = ".tmp.";
constexpr size_t kTempLetters = 6;

}  // namespace

void write_file_atomic(const std::string &path, const void *data, size_t size, size_t fail_after) {
  const std::string dir = parent_dir(path);
  make_dirs(dir);
  std::string tmp = path + kTempMark + std::string(kTempLetters, 'X');
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(HPU_ERROR_IO, "cannot create a temporary file next to %s: %s", path.c_str(), std::strerror(errno));
  const char *p = static_cast<const char *>(data);
  size_t left = size;
  while (left > 0) {
    const size_t done = size - left;
    ssize_t w = done >= fail_after ? -1 : ::write(fd, p, std::min(left, fail_after - done));
    if (w < 0 && done >= fail_after) errno = ENOSPC;
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      if (done >= fail_after)
        fail(HPU_ERROR_IO, "writing %s: %s after %zu of %zu bytes (injected: HPU_FAULT_INJECT checkpoint_short_write=%zu)",
             tmp.c_str(), std::strerror(e), done, size, fail_after);
      fail(HPU_ERROR_IO, "writing %s: %s", tmp.c_str(), std::strerror(e));
    }
    p += w;
    left -= size_t(w);
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(HPU_ERROR_IO, "syncing %s: %s", tmp.c_str(), std::strerror(e));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(HPU_ERROR_IO, "renaming %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(e));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<std::string> remove_stale_temporaries(const std::string &dir, const std::string &ext) {
  std::vector<std::string> removed;
  DIR *d = ::opendir(dir.c_str());
  if (!d) return removed;
  const std::string mark = ext + kTempMark;
  while (dirent *e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t at = name.size() >= mark.size() + kTempLetters ? name.size() - mark.size() - kTempLetters : 0;
    if (at == 0 || name.compare(at, mark.size(), mark) != 0) continue;
    const std::string letters = name.substr(at + mark.size());
    if (!std::all_of(letters.begin(), letters.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
      continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0) removed.push_back(name);
  }
  ::closedir(d);
  return removed;
}

std::string read_file(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(errno == ENOENT ? HPU_ERROR_NOT_FOUND : HPU_ERROR_IO, "%s: %s", path.c_str(), std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      fail(HPU_ERROR_IO, "reading %s: %s", path.c_str(), std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

}  // namespace hpu::detail
