/* A job for the daemon benchmarks: appends "<job> <node> <tick> <lateness_us>" to
 * the file named by argv[1], where lateness = this process's start − TICKD_TICK_UNIX
 * on the wall clock. One write(2) with O_APPEND, so concurrent runs never interleave. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const char* job = getenv("TICKD_JOB");
  const char* node = getenv("TICKD_NODE");
  const char* tick = getenv("TICKD_TICK_UNIX");
  if (argc < 2 || job == NULL || node == NULL || tick == NULL) return 2;
  long long lateness_us =
      ((long long)now.tv_sec - atoll(tick)) * 1000000LL + now.tv_nsec / 1000;
  char line[256];
  int n = snprintf(line, sizeof line, "%s %s %s %lld\n", job, node, tick, lateness_us);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n) return 1;
  return close(fd) == 0 ? 0 : 1;
}
