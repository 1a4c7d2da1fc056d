#include "lock/registry.h"

namespace tickd::lock {

std::string_view ClaimStatusName(ClaimStatus s) {
  switch (s) {
    case ClaimStatus::kWon:
      return "won";
    case ClaimStatus::kLost:
      return "lost";
    case ClaimStatus::kBusy:
      return "busy";
    case ClaimStatus::kMissed:
      return "missed";
  }
  return "unknown";
}

}  // namespace tickd::lock
