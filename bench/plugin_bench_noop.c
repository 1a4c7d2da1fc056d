/* The benchmark's plugin: one log line, then success — the cost measured is tickd's. */
#include <tickd/plugin.h>

static int Run(const tickd_run *run, char *err, size_t err_len) {
  (void)err;
  (void)err_len;
  run->log(run->log_ctx, TICKD_LOG_INFO, "noop");
  return 0;
}

static const tickd_plugin kPlugin = {TICKD_PLUGIN_ABI_VERSION, "noop", NULL, Run, NULL};

TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
