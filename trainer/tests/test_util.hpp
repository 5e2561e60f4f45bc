// Helpers shared by the trainer tests: temporary folders and error checks.
#pragma once

#include <hpu/hpu.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <dirent.h>
#include <unistd.h>

namespace trainer_test {

// A fresh folder under $TMPDIR, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/hpu-trainer-test-XXXXXX";
    char *p = ::mkdtemp(tmpl.data());
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void spit(const std::string &path, const std::string &data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

inline bool file_exists(const std::string &path) { return ::access(path.c_str(), F_OK) == 0; }

// The names in a folder (none if it does not exist).
inline std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

}  // namespace trainer_test

// Expects `stmt` to throw hpu::Error with `status` and a message containing `needle`.
#define EXPECT_HPU_ERROR(stmt, status_, needle)                                                   \
  do {                                                                                            \
    try {                                                                                         \
      stmt;                                                                                       \
      ADD_FAILURE() << #stmt << " did not throw";                                                 \
    } catch (const hpu::Error &e_) {                                                              \
      EXPECT_EQ(e_.status(), status_) << e_.what();                                               \
      EXPECT_NE(std::string(e_.what()).find(needle), std::string::npos)                           \
          << "message \"" << e_.what() << "\" lacks \"" << (needle) << "\"";                     \
    }                                                                                             \
  } while (0)
