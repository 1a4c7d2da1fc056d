#include "config/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <vector>

namespace tickd::config {

namespace {

char Fold(char c) {
  if (c == '-') return '_';
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

}  // namespace

int EditDistance(std::string_view a, std::string_view b) {
  // One row of the classic dynamic programme.
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      const int cost = Fold(a[i - 1]) == Fold(b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates) {
  constexpr int kMaxDistance = 2;
  std::optional<std::string> best;
  int best_distance = kMaxDistance + 1;
  for (std::string_view candidate : candidates) {
    const int d = EditDistance(word, candidate);
    if (d < best_distance && d < static_cast<int>(candidate.size()) &&
        d < static_cast<int>(word.size())) {
      best = std::string(candidate);
      best_distance = d;
    }
  }
  return best;
}

}  // namespace tickd::config
