// What every claim benchmark counts and prints: wins per (job, T) and percentiles; and
// the usage check they share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tickd::bench {

// How many replicas won each (job index, T).
using Winners = std::map<std::pair<int, std::int64_t>, int>;

// The value at fraction `p` (0..1) of `v` once sorted; 0 for an empty `v`.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// How many (job, T) for jobs 0..jobs−1 and T in [first, last] were not won exactly once.
inline int ExactlyOnceViolations(const Winners& winners, int jobs, std::int64_t first,
                                 std::int64_t last) {
  int bad = 0;
  for (std::int64_t t = first; t <= last; ++t) {
    for (int j = 0; j < jobs; ++j) {
      const auto it = winners.find({j, t});
      if (it == winners.end() || it->second != 1) ++bad;
    }
  }
  return bad;
}

// True when the arguments ask for the usage text (the benches take "--key value" pairs).
inline bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace tickd::bench
