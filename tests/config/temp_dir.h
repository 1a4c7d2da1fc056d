// A fresh folder (mkdtemp) per test for job files, removed afterwards.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"

namespace tickd::config::testing {

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "tickd-config-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to `name` in this folder with `mode`; returns the file's path.
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
    const std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// 2026-01-01T00:00:00Z: a fixed "now" so periods and warnings do not depend on the day.
inline LoadOptions TestOptions() {
  LoadOptions options;
  options.now = cron::Instant(std::chrono::seconds(1'767'225'600));
  return options;
}

inline std::vector<std::string> ErrorLines(
    const tl::expected<Config, std::vector<ConfigError>>& result) {
  std::vector<std::string> lines;
  if (!result) {
    for (const ConfigError& e : result.error()) lines.push_back(e.ToString());
  }
  return lines;
}

inline std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace tickd::config::testing
