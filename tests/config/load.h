// Loading a job file written into a TempDir, as every config test does: the Config
// when it must load, else every error line, checked with CHECK_ERROR.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "config/config.h"
#include "tests/config/temp_dir.h"

namespace tickd::config::testing {

// A job file that was loaded: its path and every error line (none when it loaded).
struct Loaded {
  std::string file;
  std::vector<std::string> errors;
  // True when an error line starts with `expected`, where a leading "FILE" stands for
  // the file's path.
  bool Has(const std::string& expected) const {
    std::string line = expected;
    if (line.rfind("FILE", 0) == 0) line = file + line.substr(4);
    for (const std::string& e : errors) {
      if (e.rfind(line, 0) == 0) return true;
    }
    return false;
  }
};

// Writes `text` as jobs.yaml in `dir` and loads it.
inline Loaded LoadText(const TempDir& dir, const std::string& text,
                       const LoadOptions& options = TestOptions()) {
  Loaded out;
  out.file = dir.Write("jobs.yaml", text);
  out.errors = ErrorLines(LoadConfig(out.file, options));
  return out;
}

// The Config of `file`; the test stops (showing the errors) when it does not load.
inline Config MustLoad(const std::string& file, const LoadOptions& options = TestOptions()) {
  auto result = LoadConfig(file, options);
  INFO(Joined(ErrorLines(result)));
  REQUIRE(result.has_value());
  return *result;
}

}  // namespace tickd::config::testing

// CHECKs that `loaded` (a Loaded) has an error line starting with `expected`, showing
// every error line when it has not.
#define CHECK_ERROR(loaded, expected)                              \
  do {                                                             \
    INFO(::tickd::config::testing::Joined((loaded).errors));       \
    CHECK((loaded).Has(expected));                                 \
  } while (false)
