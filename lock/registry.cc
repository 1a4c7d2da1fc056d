#include "lock/registry.h"

#include <map>
#include <mutex>

#include "lock/memory/memory_backend.h"
#include "lock/none/none_backend.h"
#ifdef TICKD_WITH_SQLITE
#include "lock/sqlite/sqlite_backend.h"
#endif
#ifdef TICKD_WITH_REDIS
#include "lock/redis/redis_backend.h"
#endif
#ifdef TICKD_WITH_ZOOKEEPER
#include "lock/zookeeper/zookeeper_backend.h"
#endif
#ifdef TICKD_WITH_ETCD
#include "lock/etcd/etcd_backend.h"
#endif
#ifdef TICKD_WITH_POSTGRES
#include "lock/postgres/postgres_backend.h"
#endif

namespace tickd::lock {


namespace {

using OpenFn = Result<std::unique_ptr<Backend>> (*)(const BackendOptions&, Clock&);

// "memory" gives a fresh store; "memory://NAME" gives a handle on a store shared by
// every opener of NAME in this process (in-process multi-replica tests). A named
// store keeps the clock of its first opener and lives while a handle does.
Result<std::unique_ptr<Backend>> OpenMemory(const BackendOptions& options, Clock& clock) {
  constexpr std::string_view kPrefix = "memory://";
  const std::string& url = options.url;
  if (url.size() <= kPrefix.size() || url.compare(0, kPrefix.size(), kPrefix) != 0) {
    return NewMemoryBackend(clock);
  }
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<Backend>> stores;
  std::lock_guard lock(mu);
  std::shared_ptr<Backend> store = stores[url].lock();
  if (!store) {
    store = NewMemoryBackend(clock);
    stores[url] = store;
  }
  return NewSharedBackendHandle(std::move(store));
}

Result<std::unique_ptr<Backend>> OpenNone(const BackendOptions&, Clock& clock) {
  return NewNoneBackend(clock);
}

#ifdef TICKD_WITH_SQLITE
Result<std::unique_ptr<Backend>> OpenSqlite(const BackendOptions& options, Clock& clock) {
  auto path = SqlitePathFromUrl(options.url);
  if (!path) return tl::unexpected(path.error());
  SqliteOptions sqlite;
  sqlite.path = *path;
  sqlite.busy_timeout = options.op_timeout;
  sqlite.retention = options.retention;
  // The store's clock is the host's, which every replica on it shares: a replica's
  // real clock is what a preload library (libfaketime) may fake, so the kernel's is
  // read instead (backends.md, SQLite, "Time"). A simulated clock (tests) stays.
  Clock& store_clock =
      dynamic_cast<RealClock*>(&clock) != nullptr ? HostClock::Instance() : clock;
  return NewSqliteBackend(sqlite, store_clock);
}
#endif

#ifdef TICKD_WITH_REDIS
// The server's clock decides leases and deadlines: the replica's Clock is not used.
Result<std::unique_ptr<Backend>> OpenRedis(const BackendOptions& options, Clock&) {
  RedisOptions redis;
  redis.url = options.url;
  redis.username = options.username;
  redis.password = options.password;
  redis.op_timeout = options.op_timeout;
  redis.retention = options.retention;
  return NewRedisBackend(redis);
}
#endif

#ifdef TICKD_WITH_ZOOKEEPER
// The ensemble's clock (node mtimes) decides leases and deadlines, not the replica's.
Result<std::unique_ptr<Backend>> OpenZookeeper(const BackendOptions& options, Clock&) {
  ZookeeperOptions zookeeper;
  zookeeper.url = options.url;
  zookeeper.username = options.username;
  zookeeper.password = options.password;
  zookeeper.op_timeout = options.op_timeout;
  return NewZookeeperBackend(zookeeper);
}
#endif

#ifdef TICKD_WITH_ETCD
// etcd's clock decides leases (and, through its replies' Date, deadlines).
Result<std::unique_ptr<Backend>> OpenEtcd(const BackendOptions& options, Clock&) {
  EtcdOptions etcd;
  etcd.url = options.url;
  etcd.username = options.username;
  etcd.password = options.password;
  etcd.tls = options.tls;
  etcd.op_timeout = options.op_timeout;
  return NewEtcdBackend(etcd);
}
#endif

#ifdef TICKD_WITH_POSTGRES
// The database's clock decides leases and deadlines: the replica's Clock is not used.
Result<std::unique_ptr<Backend>> OpenPostgres(const BackendOptions& options, Clock&) {
  PostgresOptions postgres;
  postgres.url = options.url;
  postgres.username = options.username;
  postgres.password = options.password;
  postgres.tls = options.tls;
  postgres.op_timeout = options.op_timeout;
  postgres.retention = options.retention;
  return NewPostgresBackend(postgres);
}
#endif

struct BackendEntry {
  std::string_view name;  // the `backend:` value and the URL scheme
  OpenFn open;
};

// Every backend built in, by name. A new backend adds one line here (behind its
// TICKD_WITH_<BACKEND> option) and its target to lock/CMakeLists.txt.
constexpr BackendEntry kBackends[] = {
#ifdef TICKD_WITH_SQLITE
    {"sqlite", OpenSqlite},
#endif
#ifdef TICKD_WITH_REDIS
    {"redis", OpenRedis},
#endif
#ifdef TICKD_WITH_ETCD
    {"etcd", OpenEtcd},
#endif
#ifdef TICKD_WITH_POSTGRES
    {"postgres", OpenPostgres},  // scheme alias "postgresql" (see OpenBackend)
#endif
#ifdef TICKD_WITH_ZOOKEEPER
    {"zookeeper", OpenZookeeper},
#endif
    {"none", OpenNone},
    {"memory", OpenMemory},
};

std::string_view SchemeOf(std::string_view url) {
  const auto colon = url.find("://");
  return colon == std::string_view::npos ? std::string_view() : url.substr(0, colon);
}

}  // namespace

Result<std::unique_ptr<Backend>> OpenBackend(const BackendOptions& options, Clock& clock) {
  std::string_view name = options.backend;
  const std::string_view scheme = SchemeOf(options.url);
  if (name.empty()) name = scheme;
  const std::string context = "lock backend " + std::string(name.empty() ? "?" : name) +
                              (options.url.empty() ? "" : " (" + RedactUrl(options.url) + ")");
  if (name.empty()) return MakeError(context, "no backend named and no URL scheme to choose one");
  if (name != "none" && name != "memory" && !scheme.empty() && scheme != name &&
      !(name == "postgres" && scheme == "postgresql") &&
      !(name == "redis" && scheme == "redis-sentinel")) {
    return MakeError(context, "the URL scheme '" + std::string(scheme) +
                                  "' does not match the backend '" + std::string(name) + "'");
  }
  for (const BackendEntry& entry : kBackends) {
    if (entry.name != name) continue;
    auto backend = entry.open(options, clock);
    if (!backend) {
      Error e = backend.error();
      if (e.context.empty()) e.context = context;
      return tl::unexpected(std::move(e));
    }
    return backend;
  }
  std::string known;
  for (const std::string& n : BackendNames()) known += (known.empty() ? "" : ", ") + n;
  return MakeError(context, "unknown or not built in (this build has: " + known + ")");
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const BackendEntry& entry : kBackends) names.emplace_back(entry.name);
  return names;
}

std::string RedactUrl(const std::string& url) {
  std::string out = url;
  // userinfo: scheme://user:password@host → scheme://user:***@host
  const auto scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const auto auth_begin = scheme_end + 3;
    const auto auth_end = out.find_first_of("/?#", auth_begin);
    const auto at = out.rfind('@', auth_end == std::string::npos ? out.size() : auth_end);
    if (at != std::string::npos && at >= auth_begin) {
      const auto colon = out.find(':', auth_begin);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // query parameters: ?password=… / &password=… (libpq and redis URL styles)
  for (std::string key : {"password=", "passwd=", "pass="}) {
    std::size_t pos = 0;
    while ((pos = out.find(key, pos)) != std::string::npos) {
      const bool at_param = pos > 0 && (out[pos - 1] == '?' || out[pos - 1] == '&');
      pos += key.size();
      if (!at_param) continue;
      const auto end = out.find_first_of("&#", pos);
      out.replace(pos, (end == std::string::npos ? out.size() : end) - pos, "***");
    }
  }
  return out;
}

}  // namespace tickd::lock
