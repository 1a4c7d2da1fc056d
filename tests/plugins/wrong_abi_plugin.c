/* A plugin built for a future ABI: abi_version 2 under the v1 symbol. */
#include <tickd/plugin.h>

static int Run(const tickd_run *run, char *err, size_t err_len) {
  (void)run;
  (void)err;
  (void)err_len;
  return 0;
}

static const tickd_plugin kPlugin = {2, "wrong-abi", NULL, Run, NULL};

TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
