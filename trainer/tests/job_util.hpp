// Helpers for the tests of job documents.
#pragma once

#include <hpu/trainer.hpp>

#include <gtest/gtest.h>

#include <string>

namespace trainer_test {

// The error parse_job gives for `text` (named job.json), or "" when it parses;
// every error is HPU_ERROR_CONFIG.
inline std::string job_error(const std::string &text) {
  try {
    hpu::parse_job(text, "job.json");
  } catch (const hpu::Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_CONFIG) << e.what();
    return e.what();
  }
  return "";
}

}  // namespace trainer_test
