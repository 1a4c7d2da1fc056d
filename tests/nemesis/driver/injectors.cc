#include "tests/nemesis/driver/injectors.h"

#include <stdexcept>

namespace tickd::nemesis {

#ifndef TICKD_NEMESIS_HAVE_FAULTS
// Part F (tests/nemesis/faults) is not in this tree yet: every injector says so.
namespace {
[[noreturn]] void Missing() {
  throw std::runtime_error("the fault injectors (tests/nemesis/faults) are not built");
}
}  // namespace
std::unique_ptr<StoreProxy> MakeProxy(const std::string&) { Missing(); }
std::string PartitionsUnavailable() { return "the fault injectors are not built"; }
std::unique_ptr<Partitions> MakePartitions(int, const std::string&) { Missing(); }
std::unique_ptr<ReplicaClock> MakeClock(const std::string&) { Missing(); }
#endif

}  // namespace tickd::nemesis
