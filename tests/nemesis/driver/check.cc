#include "tests/nemesis/driver/check.h"

namespace tickd::nemesis {

#ifndef TICKD_NEMESIS_HAVE_CHECKER
CheckOutput RunCheck(const CheckInput&) {
  CheckOutput out;
  out.error = "the checker (tests/nemesis/checker) is not built";
  return out;
}
#endif

}  // namespace tickd::nemesis
