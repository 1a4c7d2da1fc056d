/* orders-cleanup — closes unpaid orders older than a threshold and gives their items
 * back to stock, as a tickd plugin (C, against <tickd/plugin.h> and SQLite alone).
 *
 * Config (plugin.config):
 *   db           path of the shop's SQLite database (see shopctl)        required
 *   older_than   seconds an unpaid order may stay open (default 1800), counted back
 *                from the tick, so every replica agrees on which orders are stale
 *   check_fence  true (default) | false — false shows what the fence prevents
 *   work_ms      pause between reading the work list and writing (default 0): a
 *                slow batch, or a holder that a GC pause or SIGSTOP froze
 *
 * The fence protocol. A batch job reads its work list, works, then writes — and a
 * holder can be frozen anywhere in between while its lease runs out and another
 * replica takes over. So the shop itself keeps the highest fence it has accepted
 * (table `fence`) and the plugin touches it twice:
 *   1. accept: in one transaction, refuse if our fence is lower than the stored one
 *      (equal is a retry of the same claim), else store ours; read the stale orders;
 *   2. write: in one transaction, refuse (rollback, exit 3) if a higher fence has been
 *      accepted since step 1, else close the listed orders, restore their items'
 *      stock and log each restoration in `restocks`.
 * A stale holder therefore fails in step 2 — it cannot restore stock a newer holder
 * has restored (or is about to). The write deliberately trusts its work list instead
 * of re-reading each order's status: that trust is what a lock plus a fence makes
 * safe, and what `backend: none` (or check_fence: false) shows to be unsafe. */
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickd/plugin.h>

enum { kExitStaleFence = 3, kExitDatabase = 4, kExitConfig = 5, kExitCancelled = 6 };

typedef struct {
  char db[4096];
  long long older_than_s;
  int check_fence;
  long long work_ms;
} Config;

/* A minimal reader for the flat JSON object tickd passes (nlohmann's compact dump):
 * the text right after "key": — or NULL. */
static const char *JsonValue(const char *json, const char *key) {
  char needle[128];
  snprintf(needle, sizeof needle, "\"%s\":", key);
  const char *at = strstr(json, needle);
  return at != NULL ? at + strlen(needle) : NULL;
}

static int ParseConfig(const char *json, Config *c, char *err, size_t err_len) {
  memset(c, 0, sizeof *c);
  c->older_than_s = 1800;
  c->check_fence = 1;
  const char *v = JsonValue(json, "db");
  if (v == NULL || *v != '"') {
    snprintf(err, err_len, "config: \"db\" (the shop database path) is required");
    return kExitConfig;
  }
  const char *end = strchr(v + 1, '"');
  size_t n = end != NULL ? (size_t)(end - v - 1) : 0;
  if (end == NULL || n == 0 || n >= sizeof c->db) {
    snprintf(err, err_len, "config: \"db\" must be a non-empty path");
    return kExitConfig;
  }
  memcpy(c->db, v + 1, n);
  if ((v = JsonValue(json, "older_than")) != NULL) c->older_than_s = strtoll(v, NULL, 10);
  if ((v = JsonValue(json, "work_ms")) != NULL) c->work_ms = strtoll(v, NULL, 10);
  if ((v = JsonValue(json, "check_fence")) != NULL) c->check_fence = strncmp(v, "false", 5) != 0;
  return 0;
}

static void Logf(const tickd_run *run, int level, const char *format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  run->log(run->log_ctx, level, message);
}

static int Fail(sqlite3 *db, char *err, size_t err_len, const char *what) {
  snprintf(err, err_len, "%s: %s", what, sqlite3_errmsg(db));
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return kExitDatabase;
}

/* The stored fence, or -1 on error. */
static long long StoredFence(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  long long value = -1;
  if (sqlite3_prepare_v2(db, "SELECT value FROM fence WHERE id = 1", -1, &st, NULL) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    value = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return value;
}

/* Begins a write transaction, refusing (rollback, kExitStaleFence) when the shop has
 * accepted a fence higher than ours. */
static int BeginFenced(sqlite3 *db, const tickd_run *run, const Config *c, char *err,
                       size_t err_len) {
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
    return Fail(db, err, err_len, "begin");
  }
  long long stored = StoredFence(db);
  if (stored < 0) return Fail(db, err, err_len, "read fence");
  if (c->check_fence && (long long)run->fence < stored) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    snprintf(err, err_len, "stale fence %llu: the shop has accepted fence %lld; nothing written",
             (unsigned long long)run->fence, stored);
    return kExitStaleFence;
  }
  return 0;
}

/* Step 1: accept our fence and read the work list (ids of stale unpaid orders). */
static int Accept(sqlite3 *db, const tickd_run *run, const Config *c, long long **ids,
                  size_t *count, char *err, size_t err_len) {
  int rc = BeginFenced(db, run, c, err, err_len);
  if (rc != 0) return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "UPDATE fence SET value = max(value, ?1) WHERE id = 1", -1, &st,
                         NULL) != SQLITE_OK) {
    return Fail(db, err, err_len, "prepare fence");
  }
  sqlite3_bind_int64(st, 1, (sqlite3_int64)run->fence);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Fail(db, err, err_len, "store fence");

  if (sqlite3_prepare_v2(db,
                         "SELECT id FROM orders WHERE status = 'unpaid' AND created_at <= ?1 "
                         "ORDER BY id",
                         -1, &st, NULL) != SQLITE_OK) {
    return Fail(db, err, err_len, "prepare select");
  }
  sqlite3_bind_int64(st, 1, run->tick_unix - c->older_than_s);
  size_t cap = 0;
  *count = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*count == cap) {
      cap = cap ? cap * 2 : 64;
      long long *grown = realloc(*ids, cap * sizeof **ids);
      if (grown == NULL) {
        sqlite3_finalize(st);
        snprintf(err, err_len, "out of memory");
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return kExitDatabase;
      }
      *ids = grown;
    }
    (*ids)[(*count)++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Fail(db, err, err_len, "select stale orders");
  if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    return Fail(db, err, err_len, "commit");
  }
  return 0;
}

/* Step 2: close the listed orders and restore their stock, unless superseded. */
static int Write(sqlite3 *db, const tickd_run *run, const Config *c, const long long *ids,
                 size_t count, char *err, size_t err_len) {
  int rc = BeginFenced(db, run, c, err, err_len);
  if (rc != 0) return rc;
  static const char *const kSql[] = {
      "UPDATE orders SET status = 'closed', closed_at = ?2, closed_fence = ?3 WHERE id = ?1",
      "UPDATE products SET stock = stock + (SELECT SUM(qty) FROM order_items "
      "WHERE order_id = ?1 AND product_id = products.id) "
      "WHERE id IN (SELECT product_id FROM order_items WHERE order_id = ?1)",
      "INSERT INTO restocks(order_id, fence, node, tick) VALUES (?1, ?3, ?4, ?2)",
  };
  enum { kStatements = sizeof kSql / sizeof kSql[0] };
  sqlite3_stmt *st[kStatements] = {NULL};
  int result = 0;
  for (int s = 0; s < kStatements && result == 0; ++s) {
    if (sqlite3_prepare_v2(db, kSql[s], -1, &st[s], NULL) != SQLITE_OK) {
      result = Fail(db, err, err_len, "prepare");
    }
  }
  for (size_t i = 0; i < count && result == 0; ++i) {
    for (int s = 0; s < kStatements && result == 0; ++s) {
      sqlite3_reset(st[s]);
      sqlite3_bind_int64(st[s], 1, ids[i]);
      if (sqlite3_bind_parameter_count(st[s]) >= 2) sqlite3_bind_int64(st[s], 2, run->tick_unix);
      if (sqlite3_bind_parameter_count(st[s]) >= 3) {
        sqlite3_bind_int64(st[s], 3, (sqlite3_int64)run->fence);
      }
      if (sqlite3_bind_parameter_count(st[s]) >= 4) {
        sqlite3_bind_text(st[s], 4, run->node, -1, SQLITE_TRANSIENT);
      }
      if (sqlite3_step(st[s]) != SQLITE_DONE) result = Fail(db, err, err_len, "close order");
    }
  }
  for (int s = 0; s < kStatements; ++s) sqlite3_finalize(st[s]);
  if (result != 0) return result;
  if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    return Fail(db, err, err_len, "commit");
  }
  return 0;
}

/* Sleeps work_ms in small steps; non-zero when the run was cancelled meanwhile. */
static int Work(const tickd_run *run, long long work_ms) {
  for (long long slept = 0; slept < work_ms; slept += 10) {
    if (run->cancelled(run->cancel_ctx)) return 1;
    struct timespec step = {0, 10 * 1000 * 1000};
    nanosleep(&step, NULL);
  }
  return run->cancelled(run->cancel_ctx);
}

static int Init(const char *config_json, char *err, size_t err_len) {
  Config c;
  return ParseConfig(config_json, &c, err, err_len);
}

static int Run(const tickd_run *run, char *err, size_t err_len) {
  Config c;
  int rc = ParseConfig(run->config_json, &c, err, err_len);
  if (rc != 0) return rc;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(c.db, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    snprintf(err, err_len, "open %s: %s", c.db, db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return kExitDatabase;
  }
  sqlite3_busy_timeout(db, 10000);
  long long *ids = NULL;
  size_t count = 0;
  rc = Accept(db, run, &c, &ids, &count, err, err_len);
  if (rc == 0 && Work(run, c.work_ms)) {
    snprintf(err, err_len, "cancelled before writing; nothing written");
    rc = kExitCancelled;
  }
  if (rc == 0) rc = Write(db, run, &c, ids, count, err, err_len);
  if (rc == 0) {
    Logf(run, TICKD_LOG_INFO, "closed %zu unpaid orders older than %llds, stock restored (fence %llu)",
         count, c.older_than_s, (unsigned long long)run->fence);
  }
  free(ids);
  sqlite3_close(db);
  return rc;
}

static const tickd_plugin kPlugin = {TICKD_PLUGIN_ABI_VERSION, "orders-cleanup", Init, Run,
                                     NULL};

TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
