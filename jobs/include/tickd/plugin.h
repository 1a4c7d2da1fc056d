/* tickd plugin C ABI, version 1 (docs/design.md §8).
 *
 * A plugin is a shared library that exports one symbol, tickd_plugin_v1, returning a
 * pointer to a static tickd_plugin. tickd loads it with dlopen(RTLD_NOW | RTLD_LOCAL),
 * checks both abi_version fields, and for every run calls init (if set), run, then
 * shutdown (if set). With `isolation: process` (the default) each run happens in a
 * fresh `tickd plugin-host` child process; with `isolation: none` the library stays
 * loaded in the daemon and runs on a worker thread. This header is all a plugin
 * author needs: pure C99, no tickd types beyond the ones below.
 *
 * ABI changes add a new symbol (tickd_plugin_v2), never change this one. */
#ifndef TICKD_PLUGIN_H_
#define TICKD_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TICKD_PLUGIN_ABI_VERSION 1

/* Log levels for tickd_run.log. */
#define TICKD_LOG_DEBUG 0
#define TICKD_LOG_INFO 1
#define TICKD_LOG_WARN 2
#define TICKD_LOG_ERROR 3

typedef struct tickd_run {
  uint32_t abi_version;          /* TICKD_PLUGIN_ABI_VERSION */
  const char *job;               /* job name */
  const char *node;              /* node id of the replica running it */
  int64_t tick_unix;             /* scheduled instant, seconds since the epoch (UTC) */
  uint64_t fence;                /* fencing token of this claim */
  uint32_t attempt;              /* 1 on the first try */
  const char *config_json;       /* the job's `plugin.config` as JSON, "{}" when absent */
  void (*log)(void *log_ctx, int level, const char *message); /* 0 debug … 3 error */
  void *log_ctx;
  int (*cancelled)(void *cancel_ctx); /* non-zero once the run must stop */
  void *cancel_ctx;
} tickd_run;

typedef struct tickd_plugin {
  uint32_t abi_version;          /* TICKD_PLUGIN_ABI_VERSION */
  const char *name;
  int (*init)(const char *config_json, char *err, size_t err_len);   /* optional; 0 = ok */
  int (*run)(const tickd_run *run, char *err, size_t err_len);       /* 0 = success, else exit status */
  void (*shutdown)(void);                                            /* optional */
} tickd_plugin;

/* The one exported symbol. Plugins define it with default visibility, e.g.
 *   TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; } */
const tickd_plugin *tickd_plugin_v1(void);   /* the one exported symbol */

#if defined(__GNUC__)
#define TICKD_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TICKD_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
}
#endif

#endif /* TICKD_PLUGIN_H_ */
