#include "app/peers.h"

#include <iterator>
#include <string_view>

namespace tickd::app {

void Peers::Saw(const std::set<std::string>& nodes) {
  std::lock_guard lock(mu_);
  ++reads_;
  for (const std::string& node : nodes) last_read_[node] = reads_;
  std::erase_if(last_read_, [&](const auto& kv) { return kv.second + kKeepReads <= reads_; });
}

Peers::Rank Peers::rank() const {
  std::lock_guard lock(mu_);
  std::set<std::string_view> names = {self_};
  for (const auto& [node, read] : last_read_) names.insert(node);
  return Rank{static_cast<std::size_t>(std::distance(names.begin(), names.find(self_))),
              names.size()};
}

}  // namespace tickd::app
