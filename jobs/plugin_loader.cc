#include "jobs/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tickd::jobs {
namespace {

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlerror";
}

}  // namespace

LoadedPlugin::~LoadedPlugin() {
  if (handle_ != nullptr) dlclose(handle_);
}

Result<std::shared_ptr<LoadedPlugin>> OpenPlugin(const std::string& path) {
  dlerror();  // clear a stale message
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return MakeError(path, "dlopen: " + DlError());
  auto close = [handle] { dlclose(handle); };
  dlerror();
  void* symbol = dlsym(handle, "tickd_plugin_v1");
  if (symbol == nullptr) {
    std::string why = DlError();
    close();
    return MakeError(path, "no tickd_plugin_v1 symbol: " + why);
  }
  using EntryFn = const tickd_plugin* (*)();
  const tickd_plugin* plugin = reinterpret_cast<EntryFn>(symbol)();
  if (plugin == nullptr) {
    close();
    return MakeError(path, "tickd_plugin_v1() returned NULL");
  }
  if (plugin->abi_version != TICKD_PLUGIN_ABI_VERSION) {
    const uint32_t found = plugin->abi_version;
    close();
    return MakeError(path, "tickd_plugin_v1: abi_version " + std::to_string(found) +
                               ", this tickd supports " + std::to_string(TICKD_PLUGIN_ABI_VERSION));
  }
  if (plugin->run == nullptr) {
    close();
    return MakeError(path, "tickd_plugin_v1: run is NULL");
  }
  return std::make_shared<LoadedPlugin>(handle, plugin, path);
}

Result<void> CheckPluginLoads(const std::string& path) {
  auto opened = OpenPlugin(path);
  if (!opened) return tl::unexpected(opened.error());
  return {};
}

Result<void> CheckPluginFile(const std::string& path, bool check_permissions,
                             const PluginCheck& check) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return MakeError(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return MakeError(path, "not a regular file");
  // The library runs with the daemon's rights: like the job file itself, refuse one
  // that someone else could have replaced.
  if (check_permissions && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return MakeError(path, std::string("refused: writable by group or others (mode ") + mode +
                               "), and tickd runs its code; fix: chmod go-w " + path);
  }
  return check ? check(path) : CheckPluginLoads(path);
}

Result<std::shared_ptr<LoadedPlugin>> PluginRegistry::Get(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = plugins_.find(path);
  if (it != plugins_.end()) return it->second;
  auto opened = OpenPlugin(path);
  if (opened) plugins_.emplace(path, *opened);
  return opened;
}

}  // namespace tickd::jobs
