/* A test plugin whose behaviour its config chooses: {"mode": "ok" | "fail" | "crash" |
 * "hang" | "cooperative" | "init-fails"}. Pure C against <tickd/plugin.h> alone. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tickd/plugin.h>

static int Mode(const char *config, const char *mode) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"mode\":\"%s\"", mode);
  return strstr(config, needle) != NULL;
}

static int Init(const char *config_json, char *err, size_t err_len) {
  if (Mode(config_json, "init-fails")) {
    snprintf(err, err_len, "init refused the config");
    return 4;
  }
  return 0;
}

static int Run(const tickd_run *run, char *err, size_t err_len) {
  const char *config = run->config_json;
  if (Mode(config, "crash")) {
    volatile int *nowhere = NULL;
    *nowhere = 1; /* SIGSEGV */
    raise(SIGSEGV);
  }
  if (Mode(config, "hang")) {
    for (;;) sleep(1); /* ignores cancelled() */
  }
  if (Mode(config, "cooperative")) {
    while (!run->cancelled(run->cancel_ctx)) usleep(5000);
    snprintf(err, err_len, "cancelled");
    return 5;
  }
  if (Mode(config, "fail")) {
    snprintf(err, err_len, "failed on purpose");
    return 7;
  }
  char message[512];
  snprintf(message, sizeof message, "job=%s node=%s tick=%lld fence=%llu attempt=%u config=%s",
           run->job, run->node, (long long)run->tick_unix, (unsigned long long)run->fence,
           (unsigned)run->attempt, config);
  run->log(run->log_ctx, TICKD_LOG_INFO, message);
  run->log(run->log_ctx, TICKD_LOG_WARN, "first\nsecond");
  run->log(run->log_ctx, 9, "clamped to error");
  printf("info forged record\n"); /* the plugin's stdout must not forge a record */
  fflush(stdout);
  return 0;
}

static const tickd_plugin kPlugin = {TICKD_PLUGIN_ABI_VERSION, "behave", Init, Run, NULL};

TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
