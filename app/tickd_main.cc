// The tickd executable: the command line of libtickd.so (app/main.cc), after one look
// at the environment it was started in.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "tickd/command_line.h"

namespace {

// libfaketime, preloaded to give a replica a wrong wall clock (how anyone tries rule 15
// of docs/design.md: `faketime -f +30s tickd run …`), fakes CLOCK_MONOTONIC as well
// unless told not to, and then no timed wait of the daemon ends when due (§7). Such a
// replica should run and be judged by its store like any replica whose clock is wrong,
// so the executable starts itself again with FAKETIME_DONT_FAKE_MONOTONIC=1, which
// libfaketime reads only when it loads: the wall clock stays faked, the monotonic clock
// is the kernel's. A value set by hand is left alone (the start's check of the waits
// then refuses a start in which they are broken). Runs before any thread exists.
void KeepMonotonicClockReal(char** argv) {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload == nullptr || std::strstr(preload, "faketime") == nullptr) return;
  if (std::getenv("FAKETIME_DONT_FAKE_MONOTONIC") != nullptr ||
      std::getenv("DONT_FAKE_MONOTONIC") != nullptr) {
    return;
  }
  if (::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Still here (no /proc): carry on; the start's check says what is wrong.
}

}  // namespace

int main(int argc, char** argv) {
  KeepMonotonicClockReal(argv);
  return tickd::run_command_line(argc, argv);
}
