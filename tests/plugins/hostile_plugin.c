/* A library whose constructor misbehaves as TICKD_TEST_HOSTILE says: "crash" (a
 * write through NULL), "exit" (exit(0): the loading process would end "well"),
 * "hang", or "print" (prints "ok" to stdout, then loads: it has no tickd_plugin_v1).
 * The validator must report each as the plugin's error, whatever the library does
 * to the process that loads it (jobs::CheckPluginInHost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void Misbehave(void) {
  const char *mode = getenv("TICKD_TEST_HOSTILE");
  if (mode == NULL) return;
  if (strcmp(mode, "crash") == 0) *(volatile int *)0 = 1;
  if (strcmp(mode, "exit") == 0) exit(0);
  if (strcmp(mode, "hang") == 0) {
    for (;;) pause();
  }
  if (strcmp(mode, "print") == 0) {
    printf("ok\n");
    fflush(stdout);
  }
}
