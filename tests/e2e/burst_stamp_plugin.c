/* The burst trial's job (tests/e2e/burst_trial.cc): an in-process plugin that notes its
 * own start. Each run appends "<job> <node> <tick_unix> <start_unix_us> <fence>\n" to the
 * file its config names ({"out": "/path"}): one write(2) with O_APPEND, so the runs of
 * one instant, on their own threads and in three replicas, never interleave. The start
 * is the host's wall clock when tickd called run(), read by system call: a replica given
 * a clock of its own by libfaketime (burst_trial --ahead-ms) is judged by the host's.
 * Pure C against <tickd/plugin.h> alone. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tickd/plugin.h>

static int Run(const tickd_run *run, char *err, size_t err_len) {
  struct timespec now;
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &now);
  /* config_json is compact JSON: {"out":"/path"} (paths without quotes or escapes). */
  const char *key = "\"out\":\"";
  const char *at = strstr(run->config_json, key);
  const char *end = at == NULL ? NULL : strchr(at + strlen(key), '"');
  char path[4096];
  if (end == NULL || (size_t)(end - at) - strlen(key) >= sizeof path) {
    snprintf(err, err_len, "config names no \"out\" file: %s", run->config_json);
    return 2;
  }
  const size_t path_len = (size_t)(end - at) - strlen(key);
  memcpy(path, at + strlen(key), path_len);
  path[path_len] = '\0';
  char line[512];
  const long long start_us = (long long)now.tv_sec * 1000000LL + now.tv_nsec / 1000;
  const int n = snprintf(line, sizeof line, "%s %s %lld %lld %llu\n", run->job, run->node,
                         (long long)run->tick_unix, start_us, (unsigned long long)run->fence);
  if (n <= 0 || (size_t)n >= sizeof line) {
    snprintf(err, err_len, "record too long");
    return 2;
  }
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n) {
    snprintf(err, err_len, "%s: cannot append", path);
    if (fd >= 0) close(fd);
    return 3;
  }
  close(fd);
  return 0;
}

static const tickd_plugin kPlugin = {TICKD_PLUGIN_ABI_VERSION, "burst-stamp", NULL, Run, NULL};

TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
