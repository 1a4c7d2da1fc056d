/* A shared library that is not a tickd plugin: no tickd_plugin_v1. */
int not_a_plugin(void) { return 42; }
