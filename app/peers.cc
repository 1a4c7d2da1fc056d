#include "app/peers.h"

#include <algorithm>
#include <iterator>

#include "app/tzdata.h"

namespace tickd::app {

bool Peers::Saw(const std::set<std::string>& nodes) {
  std::lock_guard lock(mu_);
  const std::vector<std::string> before = NamesLocked();
  ++reads_;
  for (const std::string& node : nodes) last_read_[node] = reads_;
  std::erase_if(last_read_, [&](const auto& kv) { return kv.second + kKeepReads <= reads_; });
  std::erase_if(tzdata_, [&](const auto& kv) { return !last_read_.contains(kv.first); });
  return NamesLocked() != before;
}

void Peers::SawTzdata(const std::map<std::string, std::string>& versions) {
  std::lock_guard lock(mu_);
  for (const auto& [node, version] : versions) {
    if (last_read_.contains(node)) tzdata_[node] = version;
  }
}

std::map<std::string, std::string> Peers::TzdataDiffering(std::string_view ours) const {
  std::map<std::string, std::string> out;
  if (!KnownTzdata(ours)) return out;
  std::lock_guard lock(mu_);
  for (const auto& [node, version] : tzdata_) {
    if (node != self_ && KnownTzdata(version) && version != ours) out[node] = version;
  }
  return out;
}

Peers::Rank Peers::rank() const {
  std::lock_guard lock(mu_);
  const std::vector<std::string> names = NamesLocked();
  const auto self = std::lower_bound(names.begin(), names.end(), self_);
  return Rank{static_cast<std::size_t>(std::distance(names.begin(), self)), names.size()};
}

std::vector<std::string> Peers::names() const {
  std::lock_guard lock(mu_);
  return NamesLocked();
}

std::vector<std::string> Peers::NamesLocked() const {
  std::set<std::string> names = {self_};
  for (const auto& [node, read] : last_read_) names.insert(node);
  return {names.begin(), names.end()};
}

}  // namespace tickd::app
