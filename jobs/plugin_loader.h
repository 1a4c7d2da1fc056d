// Loading plugins (docs/design.md §8): dlopen(path, RTLD_NOW | RTLD_LOCAL), the
// tickd_plugin_v1 symbol, and both abi_version checks. Every failure names the path
// and carries dlerror()'s text. Used by the validator (config/), by the in-process
// runner, and by `tickd plugin-host`.
#pragma once

#include <tickd/plugin.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/error.h"

namespace tickd::jobs {

// An open plugin library. The handle is dlclose()d when the last reference goes.
// Thread-safe to share: the plugin's functions may be called from any thread.
class LoadedPlugin {
 public:
  LoadedPlugin(void* handle, const tickd_plugin* plugin, std::string path)
      : handle_(handle), plugin_(plugin), path_(std::move(path)) {}
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const tickd_plugin& plugin() const { return *plugin_; }
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  const tickd_plugin* plugin_;
  std::string path_;
};

// Opens `path` and checks it. Errors (context = the path): the file cannot be
// opened by dlopen (missing, not a shared object, unresolved symbols — RTLD_NOW),
// no tickd_plugin_v1 symbol, tickd_plugin_v1() returning NULL, an abi_version other
// than TICKD_PLUGIN_ABI_VERSION, or no run function. A library whose constructor
// crashes takes the calling process down: the daemon never calls this for a plugin
// with `isolation: process` (the plugin-host child does).
Result<std::shared_ptr<LoadedPlugin>> OpenPlugin(const std::string& path);

// OpenPlugin's checks alone, the library closed again: the validator's check made in
// this process.
Result<void> CheckPluginLoads(const std::string& path);

// How the validator loads a plugin to check it: OpenPlugin's checks, made wherever it
// likes (tickd makes them in a child: jobs::CheckPluginInHost). Errors as OpenPlugin.
using PluginCheck = std::function<Result<void>(const std::string& path)>;

// The validator's check of a plugin file: it must be a regular file, not writable
// by group or others when `check_permissions` (it runs with the daemon's rights),
// and pass `check` (nullptr: CheckPluginLoads, in this process).
// Returns the reason it is refused, as "PATH: reason" (with dlerror()'s text where
// dlopen failed).
Result<void> CheckPluginFile(const std::string& path, bool check_permissions,
                             const PluginCheck& check = nullptr);

// Plugins with `isolation: none`: each library is opened once and kept open for the
// daemon's lifetime (a library cannot be safely unloaded while a thread that ran it
// may still be inside it). Thread-safe.
class PluginRegistry {
 public:
  // The open plugin at `path`, opening it on first use. Errors as OpenPlugin; a
  // failed open is not cached (the file may be fixed).
  Result<std::shared_ptr<LoadedPlugin>> Get(const std::string& path);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<LoadedPlugin>> plugins_;  // guarded by mu_
};

}  // namespace tickd::jobs
