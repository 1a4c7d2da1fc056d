// What the plugin run tests share: a sink that records lines, and the job
// environment of a run (the parameters a plugin sees).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jobs/execution.h"

namespace tickd::jobs::testing {

struct Lines {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> lines;  // (stream, line)
  OutputSink Sink() {
    return [this](std::string_view stream, std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(std::string(stream), std::string(line));
    };
  }
  // A line on `stream` that contains `text`.
  bool Has(const std::string& stream, const std::string& text) {
    std::lock_guard lock(mu);
    for (const auto& [s, l] : lines) {
      if (s == stream && l.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

// job j, node node-a, tick 1700000000, fence 42, attempt `attempt`.
inline ProcessSpec RunSpec(std::chrono::milliseconds timeout, std::chrono::milliseconds grace,
                           int attempt = 1) {
  ProcessSpec spec;
  spec.env = {{"TICKD_JOB", "j"},
              {"TICKD_NODE", "node-a"},
              {"TICKD_TICK_UNIX", "1700000000"},
              {"TICKD_FENCE", "42"},
              {"TICKD_ATTEMPT", std::to_string(attempt)}};
  spec.timeout = timeout;
  spec.kill_grace = grace;
  return spec;
}

}  // namespace tickd::jobs::testing
