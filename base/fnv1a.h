// FNV-1a, 64 bit (http://www.isthe.com/chongo/tech/comp/fnv/): offset basis
// 14695981039346656037, prime 1099511628211, over the bytes as given.
//
// tickd uses it wherever every replica must derive the same number from a name without
// talking to the others (claim order, `H` in cron expressions, jitter offsets): it is
// tiny, defined by its constants alone, and so stable across versions, platforms and
// replicas, and easy for other tools to compute. Not a security boundary.
#pragma once

#include <cstdint>
#include <string_view>

namespace tickd {

inline constexpr std::uint64_t kFnv1aOffsetBasis = 14695981039346656037ULL;
inline constexpr std::uint64_t kFnv1aPrime = 1099511628211ULL;

// The hash of `bytes` continued from `hash` (start from kFnv1aOffsetBasis), so that a
// value can be hashed in parts without joining them first.
constexpr std::uint64_t Fnv1a64(std::string_view bytes, std::uint64_t hash = kFnv1aOffsetBasis) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnv1aPrime;
  }
  return hash;
}

}  // namespace tickd
