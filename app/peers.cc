#include "app/peers.h"

#include <algorithm>
#include <iterator>

namespace tickd::app {

bool Peers::Saw(const std::set<std::string>& nodes) {
  std::lock_guard lock(mu_);
  const std::vector<std::string> before = NamesLocked();
  ++reads_;
  for (const std::string& node : nodes) last_read_[node] = reads_;
  std::erase_if(last_read_, [&](const auto& kv) { return kv.second + kKeepReads <= reads_; });
  return NamesLocked() != before;
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
