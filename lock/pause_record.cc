#include "lock/pause_record.h"

#include <nlohmann/json.hpp>

namespace tickd::lock {

namespace {
std::int64_t Ms(WallTime t) { return t.time_since_epoch().count(); }
}  // namespace

std::string EncodePause(const Pause& pause) {
  nlohmann::json j = {{"since_ms", Ms(pause.since)},
                      {"until_ms", pause.until ? nlohmann::json(Ms(*pause.until))
                                               : nlohmann::json(nullptr)},
                      {"by", pause.by},
                      {"reason", pause.reason}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // any bytes
}

std::optional<Pause> DecodePause(std::string_view job, std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("since_ms") || !j["since_ms"].is_number_integer()) {
    return std::nullopt;
  }
  Pause p;
  p.job = std::string(job);
  p.since = WallTime(std::chrono::milliseconds(j["since_ms"].get<std::int64_t>()));
  if (const auto it = j.find("until_ms"); it != j.end() && it->is_number_integer()) {
    p.until = WallTime(std::chrono::milliseconds(it->get<std::int64_t>()));
  }
  if (const auto it = j.find("by"); it != j.end() && it->is_string()) p.by = it->get<std::string>();
  if (const auto it = j.find("reason"); it != j.end() && it->is_string()) {
    p.reason = it->get<std::string>();
  }
  return p;
}

}  // namespace tickd::lock
