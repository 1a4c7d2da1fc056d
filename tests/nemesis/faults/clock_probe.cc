// The child of fake_clock_test: for every line on stdin, prints the wall clock and the
// monotonic clock in nanoseconds ("<realtime> <monotonic>"). One long-lived process,
// so the test sees changes of the control file while it runs, not only at start.
#include <time.h>

#include <cstdio>

int main() {
  char line[64];
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    timespec real{};
    timespec mono{};
    ::clock_gettime(CLOCK_REALTIME, &real);
    ::clock_gettime(CLOCK_MONOTONIC, &mono);
    std::printf("%lld %lld\n", real.tv_sec * 1000000000LL + real.tv_nsec,
                mono.tv_sec * 1000000000LL + mono.tv_nsec);
    std::fflush(stdout);
  }
  return 0;
}
