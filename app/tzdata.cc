#include "app/tzdata.h"

#include "cron/tzdata_version.h"

namespace tickd::app {
namespace {
constexpr std::string_view kTzdataKey = "tz=";
}  // namespace

std::string WithTzdata(std::string_view config_hash, std::string_view tzdata) {
  std::string out(config_hash);
  if (!tzdata.empty()) out.append(" ").append(kTzdataKey).append(tzdata);
  return out;
}

ClaimHash SplitClaimHash(std::string_view carried) {
  ClaimHash out;
  const std::size_t space = carried.find(' ');
  out.config = carried.substr(0, space);
  std::string_view rest = space == std::string_view::npos ? "" : carried.substr(space + 1);
  while (!rest.empty()) {
    const std::size_t end = rest.find(' ');
    const std::string_view word = rest.substr(0, end);
    if (word.starts_with(kTzdataKey)) out.tzdata = word.substr(kTzdataKey.size());
    rest = end == std::string_view::npos ? "" : rest.substr(end + 1);
  }
  return out;
}

bool KnownTzdata(std::string_view version) {
  return !version.empty() && version != cron::kUnknownTzdataVersion;
}

std::string FormatTzdataPeers(const std::map<std::string, std::string>& versions) {
  std::string out;
  for (const auto& [node, version] : versions) {
    out += (out.empty() ? "" : ",") + node + ":" + (version.empty() ? "-" : version);
  }
  return out;
}

bool TzdataUpdateCheck::Check(std::string_view on_disk, Logger& log, std::string_view node) {
  if (on_disk == in_use_) {
    last_on_disk_.clear();  // back as it was: a later change is news again
    return false;
  }
  if (on_disk == last_on_disk_) return false;
  last_on_disk_ = std::string(on_disk);
  log.Log(LogLevel::kWarn, "tzdata-changed",
          {{"node", node},
           {"tzdata", in_use_},
           {"on_disk", on_disk},
           {"note", "the tz database changed on disk; restart the replica to use it"}});
  return true;
}

}  // namespace tickd::app
