// SQLite claim protocol — replicas on one host share one database file.
//
// Storage (docs/design.md §1, docs/backends.md "SQLite"):
//   tickd_ticks(job, tick) — the tick record: owner token, node, fence, state
//       running|done, lease_until, boot_id, config hash, completion. Kept until Prune,
//       so a done tick is never claimed again (the key is the tick, not the job).
//   tickd_fence — ONE row, the last fence. Moved inside the claim's transaction and
//       fsync'd with it (synchronous=FULL), so fences strictly increase for every
//       job and survive a restart. fence = max(last + 1, now_ms << 11), now_ms the
//       host's wall clock (lock/backend.h): a database deleted and created again
//       starts above every fence of the old one, and so does one from an older
//       tickd that counted 1, 2, 3 …
//   tickd_observations(job, tick, node) — the ledger: what each replica saw.
//
// Why each setting:
//   - WAL: readers (History, `tickd status`) never block claimers; needs a local file
//     system (shared-memory index), hence the NFS/CIFS warning at start.
//   - synchronous=FULL: a won claim is on disk before the winner runs the job.
//   - BEGIN IMMEDIATE for every read-then-write step: the write lock is taken before
//     the read, so two claimers can never both read "no record" and both insert.
//     busy_timeout lets a claimer wait for another's short transaction instead of
//     failing; past it the claim fails closed (an Error, never a won).
//
// Time: lease_until is in milliseconds of the host's CLOCK_BOOTTIME (monotonic, counts
// suspend), stored with the boot_id it belongs to. A wall-clock step changes no lease;
// a reboot voids every lease (another boot_id). The store's wall clock is the host's
// (clock_: HostClock, base/clock.h, once opened through the registry), read by system
// call, so a replica given a clock of its own (libfaketime) is judged by the host's:
// `early` (design.md §1 rule 15) and `missed` (T + starting_deadline vs Wall()), and
// every answer to a claim with max_lead carries it as store_ms.
//
// Liveness of a running record = same boot AND lease_until > now AND its holder lock
// is held. The holder lock of a claim is byte number <fence> of the one file
// `<db>.locks/holders`, locked with an open-file-description lock (F_OFD_SETLK, the
// kernel's per-descriptor byte-range lock: the first design's per-job lock file, with
// the fence as the byte). The winner takes it inside the claim's transaction, before
// COMMIT, and keeps it until Complete. The kernel drops it the instant the holder's
// process dies (its descriptors close), so a claimer whose F_OFD_GETLK finds the byte
// free knows the holder is dead without waiting for the lease:
//   - forbid: the dead holder's tick no longer makes the job busy;
//   - recover: the dead holder's tick may be re-claimed at once.
// Fences are unique, so a new holder always locks a byte nobody used: a paused (not
// dead) old holder whose lease ran out keeps its own byte and cannot make the new
// holder look alive or dead. Each Backend (replica) opens the file itself, so two
// replicas in one process compete exactly like two processes. Locks are only taken
// or probed inside a write transaction, so a probe never races with a claim.
// One file for every claim, never removed, is also what keeps claims cheap: a file
// created per claim (the first design) made ext4 allocate an inode per won tick,
// about 0.3 ms each, most of a 100-claim batch.
//
// Claim, in one BEGIN IMMEDIATE transaction:
//   0. max_lead and the host's wall clock before T + due_offset − max_lead → early,
//      nothing written (not even the observation).
//   1. record (job, T) exists: done or live → lost (names the holder). Dead and
//      recover → re-claim (new token, new fence, new holder lock) unless the starting
//      deadline, counted from the expiry (or from now, when the holder lock shows the
//      holder died before its lease ended), has passed → missed. Dead, no recover →
//      lost: at most once.
//   2. no record and a record of a later tick of the job exists (running or done)
//      → superseded, naming the latest (claims are monotonic per job; the primary
//      key (job, tick) makes it one index step). With max_lead, records further than
//      it ahead of the host's clock do not count (claimed for the future).
//   3. no record and Wall() > T + starting_deadline → missed.
//   4. forbid and another running record of the job is live → busy.
//   5. fence = max(last + 1, now_ms << 11), take its holder lock, write the record, COMMIT.
// Renew: one UPDATE guarded by owner, state, boot_id and lease_until > now.
// Refence (a retry's new fence): in one BEGIN IMMEDIATE transaction, the same guard as
// Renew's, the next fence as in 5, its holder lock taken before COMMIT; the old
// fence's holder lock is dropped after COMMIT.
// Complete: one UPDATE guarded by owner and state; then the holder lock is dropped.
// Completes of runs that end together share one transaction (CompleteBatch).
// ListRunning / ForceRelease (`tickd locks`): inside BEGIN IMMEDIATE (they probe holder
// locks). A running record is released only when it is not Live (lease expired, other
// boot, or its holder lock free: the holder died); the release sets state done, outcome
// "released" and clears the owner, so the old holder's Renew and Complete are refused.
#include "lock/sqlite/sqlite_backend.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/clock.h"
#include "lock/clock_check.h"
#include "lock/complete_batcher.h"

namespace tickd::lock {
namespace {

using std::chrono::milliseconds;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS tickd_ticks(
  job TEXT NOT NULL,
  tick INTEGER NOT NULL,              -- T, seconds since the epoch (UTC)
  owner TEXT NOT NULL,                -- the holder's token
  node TEXT NOT NULL,
  fence INTEGER NOT NULL,
  state TEXT NOT NULL DEFAULT 'running',
  lease_until INTEGER NOT NULL,       -- ms of CLOCK_BOOTTIME on boot `boot_id`
  boot_id TEXT NOT NULL,
  config_hash TEXT NOT NULL DEFAULT '',
  run_outcome TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, tick));
CREATE INDEX IF NOT EXISTS tickd_ticks_running ON tickd_ticks(job) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS tickd_fence(id INTEGER PRIMARY KEY CHECK (id = 1),
                                       value INTEGER NOT NULL);
INSERT OR IGNORE INTO tickd_fence(id, value) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS tickd_observations(
  job TEXT NOT NULL,
  tick INTEGER NOT NULL,
  node TEXT NOT NULL,
  outcome TEXT NOT NULL,
  node_wall_ms INTEGER NOT NULL,
  config_hash TEXT NOT NULL DEFAULT '',
  fence INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, tick, node));
-- `tickd pause`: one row per paused job ('*': every job); read before each instant.
CREATE TABLE IF NOT EXISTS tickd_pauses(
  job TEXT PRIMARY KEY,
  since_ms INTEGER NOT NULL,
  until_ms INTEGER,                   -- NULL: until `tickd resume`
  paused_by TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '');
-- The newest ticks of all jobs (History, the skew watch, tickd status) and pruning.
CREATE INDEX IF NOT EXISTS tickd_ticks_by_tick ON tickd_ticks(tick, job);
CREATE INDEX IF NOT EXISTS tickd_observations_by_tick ON tickd_observations(tick, job);
-- What a finished run printed (Completion::output), beside its tick record: claims
-- scan tickd_ticks and need not page through outputs. Pruned with the record.
CREATE TABLE IF NOT EXISTS tickd_outputs(
  job TEXT NOT NULL,
  tick INTEGER NOT NULL,
  output TEXT NOT NULL,
  PRIMARY KEY (job, tick));
)sql";

// A file descriptor owned like a unique_ptr.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The holder locks of one replica (see the top of the file): byte <fence> of
// `<dir>/holders`. `hold_` carries this replica's locks; `probe_` is a second open
// file description, so a probe sees this replica's own locks as held too.
class HolderLocks {
 public:
  Result<void> Open(const std::string& dir) {
    path_ = dir + "/holders";
    hold_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664));
    probe_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CLOEXEC));
    if (!hold_ || !probe_) return MakeError("sqlite: open " + path_, std::strerror(errno));
    return {};
  }

  // Takes the lock of `fence` for this replica; fails only on a kernel error (no one
  // else can hold a fence that was just drawn).
  Result<void> Take(std::uint64_t fence) {
    struct flock fl = Range(F_WRLCK, fence);
    if (::fcntl(hold_.get(), F_OFD_SETLK, &fl) != 0) {
      return MakeError("sqlite: lock fence " + std::to_string(fence) + " in " + path_,
                       std::strerror(errno));
    }
    return {};
  }

  void Drop(std::uint64_t fence) {
    struct flock fl = Range(F_UNLCK, fence);
    ::fcntl(hold_.get(), F_OFD_SETLK, &fl);
  }

  // True when some replica holds the lock of `fence`; an error counts as held.
  bool Held(std::uint64_t fence) {
    struct flock fl = Range(F_WRLCK, fence);
    if (::fcntl(probe_.get(), F_OFD_GETLK, &fl) != 0) return true;
    return fl.l_type != F_UNLCK;
  }

 private:
  static struct flock Range(short type, std::uint64_t fence) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(fence);  // fences stay far below 2^63
    fl.l_len = 1;
    return fl;
  }

  std::string path_;
  UniqueFd hold_;
  UniqueFd probe_;
};

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::int64_t ToMs(WallTime t) { return t.time_since_epoch().count(); }

// The statements of the claim path, prepared once per connection: parsing the SQL
// was most of the CPU of a claim. Keyed by the address of the SQL text, so each call
// site (a string literal) has its own entry.
class StmtCache {
 public:
  explicit StmtCache(sqlite3*& db) : db_(db) {}
  ~StmtCache() { Clear(); }
  StmtCache(const StmtCache&) = delete;
  StmtCache& operator=(const StmtCache&) = delete;

  // The cached statement for `sql` (reset, no bindings), prepared on first use;
  // nullptr when it is already in use (the caller prepares its own) or fails to prepare.
  sqlite3_stmt* Acquire(const char* sql) {
    Entry& e = entries_[sql];
    if (e.in_use) return nullptr;
    if (e.stmt == nullptr && sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &e.stmt,
                                                nullptr) != SQLITE_OK) {
      sqlite3_finalize(e.stmt);
      e.stmt = nullptr;
      return nullptr;
    }
    e.in_use = true;
    return e.stmt;
  }

  void Release(const char* sql) {
    Entry& e = entries_[sql];
    sqlite3_reset(e.stmt);
    sqlite3_clear_bindings(e.stmt);
    e.in_use = false;
  }

  // Finalizes every statement (before the connection closes).
  void Clear() {
    for (auto& [sql, e] : entries_) sqlite3_finalize(e.stmt);
    entries_.clear();
  }

 private:
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3*& db_;  // the backend's connection, opened after this cache exists
  std::unordered_map<const char*, Entry> entries_;
};

// One prepared statement; Bind* take 1-based indexes like sqlite3_bind_*. Built from a
// StmtCache it borrows the cached statement and gives it back on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  Stmt(StmtCache& cache, sqlite3* db, const char* sql) : db_(db) {
    stmt_ = cache.Acquire(sql);
    if (stmt_ != nullptr) {
      cache_ = &cache;
      sql_ = sql;
    } else {
      rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    }
  }
  ~Stmt() {
    if (cache_ != nullptr) {
      cache_->Release(sql_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, std::int64_t v) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    if (rc_ == SQLITE_OK) {
      rc_ = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    return *this;
  }
  Stmt& Bind(int i, std::optional<int> v) {
    if (rc_ == SQLITE_OK) rc_ = v ? sqlite3_bind_int64(stmt_, i, *v) : sqlite3_bind_null(stmt_, i);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE, or an error code (see ErrorText()).
  int Step() {
    if (rc_ != SQLITE_OK && rc_ != SQLITE_ROW && rc_ != SQLITE_DONE) return rc_;
    rc_ = sqlite3_step(stmt_);
    return rc_;
  }
  bool Failed() const { return rc_ != SQLITE_ROW && rc_ != SQLITE_DONE; }
  std::string ErrorText() const { return sqlite3_errmsg(db_); }

  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  StmtCache* cache_ = nullptr;  // set when stmt_ is borrowed from it
  const char* sql_ = nullptr;
  int rc_ = SQLITE_OK;
};

// A running record as the claim logic needs it.
struct Running {
  std::int64_t tick = 0;
  std::string owner;
  std::string node;
  std::uint64_t fence = 0;
  std::int64_t lease_until = 0;
  std::string boot_id;
  std::string config_hash;
};

class SqliteBackend final : public Backend {
 public:
  SqliteBackend(Clock& clock, std::string path, std::string boot_id)
      : clock_(clock),
        path_(std::move(path)),
        locks_dir_(path_ + ".locks"),
        boot_id_(std::move(boot_id)) {}

  ~SqliteBackend() override {
    stmts_.Clear();
    sqlite3_close_v2(db_);
  }

  Result<void> Open(const SqliteOptions& options) {
    const std::string where = "sqlite: open " + path_;
    if (boot_id_.empty()) return MakeError(where, "cannot read /proc/sys/kernel/random/boot_id");
    int rc =
        sqlite3_open_v2(path_.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      return MakeError(where, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    }
    busy_timeout_ = options.busy_timeout;
    sqlite3_busy_handler(db_, &SqliteBackend::OnBusy, this);
    // Checkpoints off the claim path: SQLite's automatic one runs inside the COMMIT
    // call that crosses the threshold (copying the WAL into the database and fsyncing
    // it), and a claim would wait for it. This hook replaces it and only counts; the
    // checkpoint runs after completes (CheckpointWhenDue).
    sqlite3_wal_hook(
        db_,
        [](void* self, sqlite3*, const char*, int pages) {
          static_cast<SqliteBackend*>(self)->wal_pages_ = pages;
          return SQLITE_OK;
        },
        this);
    // Replicas started together on a new file race to switch it to WAL and create the
    // schema; SQLite answers SQLITE_BUSY without calling the busy handler where
    // waiting could deadlock (two readers that both want to write), so the loser
    // starts over until the busy timeout.
    const auto give_up = std::chrono::steady_clock::now() + busy_timeout_;
    while (true) {
      bool busy = false;
      Result<void> set_up = SetUpSchema(where, &busy);
      if (set_up || !busy || std::chrono::steady_clock::now() >= give_up) {
        if (!set_up) return set_up;
        break;
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return MakeError(where, std::strerror(errno));
    file_dev_ = st.st_dev;
    file_ino_ = st.st_ino;
    if (::mkdir(locks_dir_.c_str(), 0775) != 0 && errno != EEXIST) {
      return MakeError("sqlite: create " + locks_dir_, std::strerror(errno));
    }
    if (auto r = holder_locks_.Open(locks_dir_); !r) return r;
    CheckFileSystem();
    if (options.retention > milliseconds(0)) {
      if (auto pruned = Prune(clock_.Wall() - options.retention); !pruned) {
        warnings_.push_back("sqlite: pruning old ticks at start failed: " +
                            pruned.error().ToString());
      }
    }
    return {};
  }

  std::string_view name() const override { return "sqlite"; }

  std::vector<std::string> StartupWarnings() override { return warnings_; }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    return std::move(ClaimBatch(std::span<const ClaimRequest>(&req, 1)).front());
  }

  // Every answer carries the host's clock when the batch began, just after the
  // scheduler sent it (ClaimOutcome::store_ms_at_batch_start): each claim is judged on
  // its own reading, but a run won on a clock ahead waits from this one (design.md §1
  // rule 15), not from one taken up to the batch's time later, nor from the end of the
  // COMMIT's fsync, when the answers arrive.
  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    const std::int64_t began_ms = ToMs(clock_.Wall());
    std::vector<Result<ClaimOutcome>> out = ClaimBatchLocked(reqs);
    for (Result<ClaimOutcome>& o : out) {
      if (o && o->store_ms != 0) {
        o->store_ms = began_ms;
        o->store_ms_at_batch_start = true;
      }
    }
    return out;
  }

  // Every claim of the batch in ONE BEGIN IMMEDIATE transaction, with the replicas'
  // observations: one write lock and one fsync for all the jobs due at one instant
  // (100 jobs every second on three replicas would otherwise be 600 fsync'd
  // transactions a second, and the replicas would queue behind each other's locks).
  std::vector<Result<ClaimOutcome>> ClaimBatchLocked(std::span<const ClaimRequest> reqs) {
    std::lock_guard lock(mu_);
    std::vector<Result<ClaimOutcome>> out;
    out.reserve(reqs.size());
    const std::string where = "sqlite: claim";
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) {
      for (std::size_t i = 0; i < reqs.size(); ++i) out.push_back(tl::unexpected(r.error()));
      return out;
    }
    if (auto same = StillThePathsFile(where); !same) {
      Exec("ROLLBACK", where);
      for (std::size_t i = 0; i < reqs.size(); ++i) out.push_back(tl::unexpected(same.error()));
      return out;
    }
    std::vector<PendingWin> wins;
    for (const ClaimRequest& req : reqs) {
      const std::string claim_where =
          "sqlite: claim " + req.job + "@" + std::to_string(req.tick_unix);
      out.push_back(ClaimLocked(req, claim_where, wins));
    }
    if (auto r = Exec("COMMIT", where); !r) {
      Exec("ROLLBACK", where);
      for (const PendingWin& w : wins) holder_locks_.Drop(w.fence);
      for (auto& o : out) {
        if (o) o = tl::unexpected(r.error());  // nothing of the batch was recorded
      }
      return out;
    }
    for (const PendingWin& w : wins) held_[w.owner_token] = w.fence;
    // Only when no complete has checkpointed for a long time (runs that last hours).
    CheckpointWhenDue(kCheckpointPagesOnClaim);
    return out;
  }

  Result<RenewStatus> Renew(const HeldClaim& held) override {
    std::lock_guard lock(mu_);
    // Without our holder lock the record may look dead to others: the claim is not ours.
    if (held_.find(held.owner_token) == held_.end()) return RenewStatus::kLost;
    const std::int64_t now = HostBootMs();
    Stmt st(stmts_, db_,
            "UPDATE tickd_ticks SET lease_until = ?1 WHERE job = ?2 AND tick = ?3 AND owner = ?4 "
            "AND state = 'running' AND boot_id = ?5 AND lease_until > ?6");
    st.Bind(1, now + held.lease.count()).Bind(2, held.job).Bind(3, held.tick_unix);
    st.Bind(4, held.owner_token).Bind(5, boot_id_).Bind(6, now);
    if (st.Step() != SQLITE_DONE) return MakeError("sqlite: renew " + held.job, st.ErrorText());
    return sqlite3_changes(db_) == 1 ? RenewStatus::kRenewed : RenewStatus::kLost;
  }

  // A retry's new fence, in one BEGIN IMMEDIATE transaction: the owner test (as Renew's),
  // the next fence from tickd_fence (as a claim draws it) and its holder lock taken
  // before COMMIT; the old fence's holder lock is dropped after it, so the record looks
  // live to other claimers throughout.
  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    std::lock_guard lock(mu_);
    const auto ours = held_.find(held.owner_token);
    if (ours == held_.end()) return RefenceOutcome{};
    const std::string where =
        "sqlite: refence " + held.job + "@" + std::to_string(held.tick_unix);
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) return tl::unexpected(r.error());
    std::uint64_t fence = 0;
    Result<RefenceOutcome> out = RefenceLocked(held, where, fence);
    if (!out || out->status != RefenceStatus::kRefenced) {
      Exec("ROLLBACK", where);
      return out;
    }
    if (auto r = Exec("COMMIT", where); !r) {
      Exec("ROLLBACK", where);
      holder_locks_.Drop(fence);
      return tl::unexpected(r.error());
    }
    holder_locks_.Drop(ours->second);
    ours->second = fence;
    return out;
  }

  // Runs that end together complete together: see lock/complete_batcher.h.
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    return completer_.Complete(held, completion);
  }

  // Every complete of the batch in ONE BEGIN IMMEDIATE transaction: one fsync, not one
  // per run (each would hold the write lock, and the next tick's claims, for an fsync).
  std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) override {
    std::lock_guard lock(mu_);
    std::vector<Result<CompleteStatus>> out;
    out.reserve(reqs.size());
    const std::string where = "sqlite: complete";
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) {
      for (std::size_t i = 0; i < reqs.size(); ++i) out.push_back(tl::unexpected(r.error()));
      return out;
    }
    for (const CompleteRequest& req : reqs) out.push_back(CompleteLocked(req));
    if (auto r = Exec("COMMIT", where); !r) {
      Exec("ROLLBACK", where);
      for (auto& o : out) {
        if (o) o = tl::unexpected(r.error());  // nothing of the batch was recorded
      }
      return out;
    }
    CheckpointWhenDue(kCheckpointPages);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (!out[i]) continue;
      // The lock carries our fence: no other record refers to it, whatever happened.
      const auto it = held_.find(reqs[i].held.owner_token);
      if (it == held_.end()) continue;
      holder_locks_.Drop(it->second);
      held_.erase(it);
    }
    return out;
  }

  Result<void> Record(const Observation& obs) override {
    std::lock_guard lock(mu_);
    Stmt st(db_,
            "INSERT OR REPLACE INTO tickd_observations(job, tick, node, outcome, node_wall_ms, "
            "config_hash, fence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    st.Bind(1, obs.job).Bind(2, obs.tick_unix).Bind(3, obs.node).Bind(4, obs.outcome);
    st.Bind(5, ToMs(obs.node_wall)).Bind(6, obs.config_hash);
    st.Bind(7, static_cast<std::int64_t>(obs.fence));
    if (st.Step() != SQLITE_DONE) return MakeError("sqlite: record " + obs.job, st.ErrorText());
    return {};
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    std::lock_guard lock(mu_);
    const std::string where = "sqlite: history";
    // One read transaction: the three queries see one snapshot.
    if (auto r = Exec("BEGIN", where); !r) return tl::unexpected(r.error());
    auto out = HistoryLocked(job, limit, where);
    Exec("ROLLBACK", where);
    return out;
  }

  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    std::lock_guard lock(mu_);
    const std::string where = "sqlite: outputs of " + std::string(job);
    std::vector<std::string> out;
    out.reserve(ticks.size());
    for (const std::int64_t tick : ticks) {
      Stmt st(stmts_, db_, "SELECT output FROM tickd_outputs WHERE job = ?1 AND tick = ?2");
      st.Bind(1, job).Bind(2, tick);
      out.push_back(st.Step() == SQLITE_ROW ? st.Text(0) : std::string());
      if (st.Failed()) return MakeError(where, st.ErrorText());
    }
    return out;
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    std::lock_guard lock(mu_);
    const std::string where = "sqlite: list running";
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) return tl::unexpected(r.error());
    const std::int64_t now = HostBootMs();
    std::vector<RunningClaim> out;
    std::string error;
    {
      Stmt st(db_,
              "SELECT tick, owner, node, fence, lease_until, boot_id, config_hash, job "
              "FROM tickd_ticks WHERE state = 'running' ORDER BY tick, job");
      while (st.Step() == SQLITE_ROW) {
        const Running rec = ReadRunning(st);
        RunningClaim c;
        c.job = st.Text(7);
        c.tick_unix = rec.tick;
        c.node = rec.node;
        c.fence = rec.fence;
        c.config_hash = rec.config_hash;
        c.lease_left = rec.boot_id == boot_id_
                           ? milliseconds(std::max<std::int64_t>(0, rec.lease_until - now))
                           : milliseconds(0);
        c.holder_alive = Live(rec, now);
        out.push_back(std::move(c));
      }
      if (st.Failed()) error = st.ErrorText();
    }
    Exec("ROLLBACK", where);
    if (!error.empty()) return MakeError(where, error);
    return out;
  }

  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    std::lock_guard lock(mu_);
    const std::string where =
        "sqlite: release " + std::string(job) + "@" + std::to_string(tick_unix);
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) return tl::unexpected(r.error());
    auto out = ForceReleaseLocked(job, tick_unix, where);
    if (sqlite3_get_autocommit(db_) == 0) Exec("ROLLBACK", where);
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    std::lock_guard lock(mu_);
    const std::string where = "sqlite: prune";
    if (auto r = Exec("BEGIN IMMEDIATE", where); !r) return tl::unexpected(r.error());
    auto out = PruneLocked(older_than, where);
    if (sqlite3_get_autocommit(db_) == 0) Exec("ROLLBACK", where);
    return out;
  }

  Result<void> SetPause(const Pause& pause) override {
    std::lock_guard lock(mu_);
    Stmt st(db_,
            "INSERT OR REPLACE INTO tickd_pauses(job, since_ms, until_ms, paused_by, reason) "
            "VALUES (?1, ?2, ?3, ?4, ?5)");
    st.Bind(1, pause.job).Bind(2, ToMs(pause.since));
    if (pause.until) st.Bind(3, ToMs(*pause.until));
    st.Bind(4, pause.by).Bind(5, pause.reason);
    if (st.Step() != SQLITE_DONE) return MakeError("sqlite: pause " + pause.job, st.ErrorText());
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    std::lock_guard lock(mu_);
    Stmt st(db_, "DELETE FROM tickd_pauses WHERE job = ?1");
    st.Bind(1, job);
    if (st.Step() != SQLITE_DONE) {
      return MakeError("sqlite: resume " + std::string(job), st.ErrorText());
    }
    return sqlite3_changes(db_) > 0;
  }

  Result<std::vector<Pause>> ListPauses() override {
    std::lock_guard lock(mu_);
    Stmt st(db_,
            "SELECT job, since_ms, until_ms, paused_by, reason FROM tickd_pauses ORDER BY job");
    std::vector<Pause> out;
    while (st.Step() == SQLITE_ROW) {
      Pause p;
      p.job = st.Text(0);
      p.since = WallTime(milliseconds(st.Int(1)));
      if (!st.IsNull(2)) p.until = WallTime(milliseconds(st.Int(2)));
      p.by = st.Text(3);
      p.reason = st.Text(4);
      out.push_back(std::move(p));
    }
    if (st.Failed()) return MakeError("sqlite: pauses", st.ErrorText());
    return out;
  }

 private:
  Result<void> Exec(const char* sql, const std::string& where) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string detail = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      return MakeError(where, detail);
    }
    return {};
  }

  // Replicas meet only through the path: a replica that (re)opens it after the file was
  // deleted or replaced — its folder removed and made again, a restore — gets another
  // file, and two files decide every tick twice. So a claim first checks that the
  // path still names the file this replica has open, and fails closed when it does
  // not: every claim an error until the replica is restarted onto the new file. One
  // stat(2) per claim batch, inside the write lock.
  Result<void> StillThePathsFile(const std::string& where) const {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) {
      return MakeError(where, "the database file " + path_ + " is gone (" +
                                  std::strerror(errno) +
                                  "): claims fail closed until this replica is restarted");
    }
    if (st.st_dev != file_dev_ || st.st_ino != file_ino_) {
      return MakeError(where, "the database file " + path_ +
                                  " was replaced by another file: claims fail closed until "
                                  "this replica is restarted");
    }
    return {};
  }

  // One complete inside the caller's BEGIN IMMEDIATE transaction.
  Result<CompleteStatus> CompleteLocked(const CompleteRequest& req) {
    const HeldClaim& held = req.held;
    const Completion& completion = req.completion;
    const std::string where = "sqlite: complete " + held.job + "@" + std::to_string(held.tick_unix);
    Stmt st(stmts_, db_,
            "UPDATE tickd_ticks SET state = 'done', run_outcome = ?1, exit_code = ?2, "
            "duration_ms = ?3, lease_until = ?4 WHERE job = ?5 AND tick = ?6 AND owner = ?7 "
            "AND state = 'running'");
    st.Bind(1, completion.outcome).Bind(2, completion.exit_code);
    st.Bind(3, static_cast<std::int64_t>(completion.duration.count())).Bind(4, HostBootMs());
    st.Bind(5, held.job).Bind(6, held.tick_unix).Bind(7, held.owner_token);
    if (st.Step() != SQLITE_DONE) return MakeError(where, st.ErrorText());
    if (sqlite3_changes(db_) == 1) {
      if (auto r = StoreOutputLocked(held, completion, where); !r) return tl::unexpected(r.error());
      return CompleteStatus::kCompleted;
    }
    // A repeated Complete of our own done record changes nothing and succeeds.
    Stmt check(stmts_, db_, "SELECT owner, state FROM tickd_ticks WHERE job = ?1 AND tick = ?2");
    check.Bind(1, held.job).Bind(2, held.tick_unix);
    const int rc = check.Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return MakeError(where, check.ErrorText());
    const bool ours_done =
        rc == SQLITE_ROW && check.Text(0) == held.owner_token && check.Text(1) == "done";
    return ours_done ? CompleteStatus::kCompleted : CompleteStatus::kNotOwner;
  }

  // The output of a run just completed (inside the caller's transaction, after the
  // owner-checked update), then retention by count: the job's outputs but its newest
  // keep_outputs go.
  Result<void> StoreOutputLocked(const HeldClaim& held, const Completion& completion,
                                 const std::string& where) {
    const std::string_view output = OutputToStore(completion.output);
    if (output.empty()) return {};
    Stmt put(stmts_, db_,
             "INSERT OR REPLACE INTO tickd_outputs(job, tick, output) VALUES (?1, ?2, ?3)");
    put.Bind(1, held.job).Bind(2, held.tick_unix).Bind(3, std::string(output));
    if (put.Step() != SQLITE_DONE) return MakeError(where, put.ErrorText());
    if (completion.keep_outputs <= 0) return {};
    Stmt trim(stmts_, db_,
              "DELETE FROM tickd_outputs WHERE job = ?1 AND tick < (SELECT tick FROM "
              "tickd_outputs WHERE job = ?1 ORDER BY tick DESC LIMIT 1 OFFSET ?2)");
    trim.Bind(1, held.job).Bind(2, static_cast<std::int64_t>(completion.keep_outputs - 1));
    if (trim.Step() != SQLITE_DONE) return MakeError(where, trim.ErrorText());
    return {};
  }

  // WAL, synchronous=FULL and the tables (idempotent). `*busy`: it failed because
  // another connection held a lock.
  Result<void> SetUpSchema(const std::string& where, bool* busy) {
    auto failed = [&](Result<void> r) {
      *busy = (sqlite3_errcode(db_) & 0xff) == SQLITE_BUSY;
      if (sqlite3_get_autocommit(db_) == 0) Exec("ROLLBACK", where);
      return r;
    };
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
      if (auto r = Exec(pragma, where); !r) return failed(r);
    }
    for (const char* step : {"BEGIN IMMEDIATE", kSchema, "COMMIT"}) {
      if (auto r = Exec(step, where); !r) return failed(r);
    }
    return {};
  }

  // SQLite's default threshold; ten times that before a claim does it itself.
  static constexpr int kCheckpointPages = 1000;
  static constexpr int kCheckpointPagesOnClaim = 10 * kCheckpointPages;

  // A PASSIVE checkpoint (never waits for readers or writers) once the WAL holds
  // `threshold` pages. Failures only leave the WAL longer; the next one retries.
  void CheckpointWhenDue(int threshold) {
    if (wal_pages_ < threshold) return;
    int wal = 0;
    int copied = 0;
    if (sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &wal, &copied) ==
        SQLITE_OK) {
      wal_pages_ = wal - copied;
    }
  }

  // A running record is live while its lease runs (this boot) and its holder keeps
  // the holder lock.
  bool Live(const Running& rec, std::int64_t now) {
    return rec.boot_id == boot_id_ && rec.lease_until > now && holder_locks_.Held(rec.fence);
  }

  static ClaimOutcome Holder(ClaimStatus status, const Running& rec) {
    ClaimOutcome out;
    out.status = status;
    out.holder_node = rec.node;
    out.holder_tick_unix = rec.tick;
    out.holder_config_hash = rec.config_hash;
    return out;
  }

  static ClaimOutcome Missed() {
    ClaimOutcome out;
    out.status = ClaimStatus::kMissed;
    return out;
  }

  static Running ReadRunning(const Stmt& st) {
    Running rec;
    rec.tick = st.Int(0);
    rec.owner = st.Text(1);
    rec.node = st.Text(2);
    rec.fence = static_cast<std::uint64_t>(st.Int(3));
    rec.lease_until = st.Int(4);
    rec.boot_id = st.Text(5);
    rec.config_hash = st.Text(6);
    return rec;
  }

  // A claim won inside the open transaction; it is ours once the COMMIT succeeds.
  struct PendingWin {
    std::string owner_token;
    std::uint64_t fence = 0;  // its holder lock is taken; dropped again if COMMIT fails
  };

  // Decides one claim inside the caller's BEGIN IMMEDIATE transaction (the caller
  // commits); a won claim is appended to `wins`.
  Result<ClaimOutcome> ClaimLocked(const ClaimRequest& req, const std::string& where,
                                   std::vector<PendingWin>& wins) {
    // The store's clock is the host's (clock_: HostClock once opened by the registry),
    // which a replica's own faked clock does not move (design.md §1 rule 15).
    const std::int64_t store_ms = ToMs(clock_.Wall());
    if (ClaimIsEarly(req, store_ms)) {  // before everything; nothing written
      ClaimOutcome early;
      early.status = ClaimStatus::kEarly;
      early.store_ms = store_ms;
      return early;
    }
    Result<ClaimOutcome> out = DecideLocked(req, store_ms, where, wins);
    if (out && req.max_lead) out->store_ms = store_ms;
    if (out && req.observe) {
      Stmt st(stmts_, db_,
              "INSERT OR REPLACE INTO tickd_observations(job, tick, node, outcome, "
              "node_wall_ms, config_hash, fence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
      st.Bind(1, req.job).Bind(2, req.tick_unix).Bind(3, req.node);
      st.Bind(4, std::string(ClaimStatusName(out->status))).Bind(5, ToMs(req.node_wall));
      st.Bind(6, req.config_hash).Bind(7, static_cast<std::int64_t>(out->fence));
      out->observed = st.Step() == SQLITE_DONE;
    }
    return out;
  }

  Result<ClaimOutcome> DecideLocked(const ClaimRequest& req, std::int64_t store_ms,
                                    const std::string& where, std::vector<PendingWin>& wins) {
    const std::int64_t now = HostBootMs();
    Stmt existing(stmts_, db_,
                  "SELECT tick, owner, node, fence, lease_until, boot_id, config_hash, state "
                  "FROM tickd_ticks WHERE job = ?1 AND tick = ?2");
    existing.Bind(1, req.job).Bind(2, req.tick_unix);
    const int rc = existing.Step();
    if (existing.Failed()) return MakeError(where, existing.ErrorText());
    if (rc == SQLITE_ROW) {
      Running rec = ReadRunning(existing);
      const bool done = existing.Text(7) == "done";
      if (done || Live(rec, now) || !req.recover) {
        ClaimOutcome lost = Holder(ClaimStatus::kLost, rec);
        lost.holder_running = !done;
        return lost;
      }
      if (req.starting_deadline) {
        // The deadline counts from the expiry: the lease end, or now when the holder
        // died earlier. After a reboot the old lease's time is meaningless: from T.
        const bool same_boot = rec.boot_id == boot_id_;
        const bool too_late =
            same_boot ? now > std::min(rec.lease_until, now) + req.starting_deadline->count()
                      : PastDeadline(req);
        if (too_late) return Missed();
      }
    } else {
      // With max_lead, a record further than it ahead of the store's clock was claimed
      // for the future (an unchecked claim, a clock set back since): it supersedes
      // nothing (design.md §1 rule 15).
      Stmt later(stmts_, db_,
                 "SELECT tick, node, config_hash FROM tickd_ticks WHERE job = ?1 AND tick > ?2 "
                 "AND tick <= ?3 ORDER BY tick DESC LIMIT 1");
      const std::int64_t latest_ok =
          req.max_lead ? (store_ms + req.max_lead->count()) / 1000 : INT64_MAX;
      later.Bind(1, req.job).Bind(2, req.tick_unix).Bind(3, latest_ok);
      const int later_rc = later.Step();
      if (later.Failed()) return MakeError(where, later.ErrorText());
      if (later_rc == SQLITE_ROW) {
        ClaimOutcome superseded;
        superseded.status = ClaimStatus::kSuperseded;
        superseded.holder_tick_unix = later.Int(0);
        superseded.holder_node = later.Text(1);
        superseded.holder_config_hash = later.Text(2);
        return superseded;
      }
      if (req.starting_deadline && PastDeadline(req)) return Missed();
    }

    if (req.forbid_overlap) {
      Stmt running(stmts_, db_,
                   "SELECT tick, owner, node, fence, lease_until, boot_id, config_hash "
                   "FROM tickd_ticks WHERE job = ?1 AND state = 'running' AND tick <> ?2");
      running.Bind(1, req.job).Bind(2, req.tick_unix);
      while (running.Step() == SQLITE_ROW) {
        Running other = ReadRunning(running);
        if (Live(other, now)) return Holder(ClaimStatus::kBusy, other);
      }
      if (running.Failed()) return MakeError(where, running.ErrorText());
    }

    Result<std::uint64_t> next_fence = NextFenceLocked(where);
    if (!next_fence) return tl::unexpected(next_fence.error());
    const std::uint64_t fence = *next_fence;

    if (auto taken = holder_locks_.Take(fence); !taken) return tl::unexpected(taken.error());

    Stmt write(stmts_, db_,
               "INSERT INTO tickd_ticks(job, tick, owner, node, fence, state, lease_until, "
               "boot_id, config_hash) VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8) "
               "ON CONFLICT(job, tick) DO UPDATE SET owner = ?3, node = ?4, fence = ?5, "
               "state = 'running', lease_until = ?6, boot_id = ?7, config_hash = ?8, "
               "run_outcome = '', exit_code = NULL, duration_ms = 0");
    write.Bind(1, req.job).Bind(2, req.tick_unix).Bind(3, req.owner_token).Bind(4, req.node);
    write.Bind(5, static_cast<std::int64_t>(fence)).Bind(6, now + req.lease.count());
    write.Bind(7, boot_id_).Bind(8, req.config_hash);
    if (write.Step() != SQLITE_DONE) {
      const std::string detail = sqlite3_errmsg(db_);
      holder_locks_.Drop(fence);
      return MakeError(where, detail);
    }
    wins.push_back(PendingWin{req.owner_token, fence});
    ClaimOutcome out;
    out.status = ClaimStatus::kWon;
    out.fence = fence;
    return out;
  }

  // Refence inside the caller's BEGIN IMMEDIATE transaction; `fence` is the new fence,
  // its holder lock taken, when the answer is kRefenced (the caller commits or drops it).
  Result<RefenceOutcome> RefenceLocked(const HeldClaim& held, const std::string& where,
                                       std::uint64_t& fence) {
    const std::int64_t now = HostBootMs();
    Stmt live(stmts_, db_,
              "SELECT 1 FROM tickd_ticks WHERE job = ?1 AND tick = ?2 AND owner = ?3 "
              "AND state = 'running' AND boot_id = ?4 AND lease_until > ?5");
    live.Bind(1, held.job).Bind(2, held.tick_unix).Bind(3, held.owner_token);
    live.Bind(4, boot_id_).Bind(5, now);
    const int rc = live.Step();
    if (rc == SQLITE_DONE) return RefenceOutcome{};
    if (rc != SQLITE_ROW) return MakeError(where, live.ErrorText());
    Result<std::uint64_t> next = NextFenceLocked(where);
    if (!next) return tl::unexpected(next.error());
    if (auto taken = holder_locks_.Take(*next); !taken) return tl::unexpected(taken.error());
    Stmt write(stmts_, db_,
               "UPDATE tickd_ticks SET fence = ?1 WHERE job = ?2 AND tick = ?3 AND owner = ?4");
    write.Bind(1, static_cast<std::int64_t>(*next)).Bind(2, held.job).Bind(3, held.tick_unix);
    write.Bind(4, held.owner_token);
    if (write.Step() != SQLITE_DONE) {
      const std::string detail = sqlite3_errmsg(db_);
      holder_locks_.Drop(*next);
      return MakeError(where, detail);
    }
    fence = *next;
    return RefenceOutcome{RefenceStatus::kRefenced, fence};
  }

  // Draws the next fence (see the top of the file) inside the caller's transaction.
  Result<std::uint64_t> NextFenceLocked(const std::string& where) {
    static_assert(kFenceEpochShift == 11, "the fence statement shifts by 11");
    Stmt next_fence(stmts_, db_,
                    "UPDATE tickd_fence SET value = max(value + 1, ?1 << 11) WHERE id = 1 "
                    "RETURNING value");
    next_fence.Bind(1, ToMs(clock_.Wall()));
    if (next_fence.Step() != SQLITE_ROW) return MakeError(where, next_fence.ErrorText());
    const auto fence = static_cast<std::uint64_t>(next_fence.Int(0));
    while (next_fence.Step() == SQLITE_ROW) {
    }
    return fence;
  }

  // SQLite's own busy handler backs off to 100 ms sleeps, which would make a claimer
  // late by up to 100 ms whenever another replica holds the write lock. Write
  // transactions here last about a millisecond: poll every 200 µs (1 ms after the
  // first 2 ms) until busy_timeout, then fail closed.
  static int OnBusy(void* self, int attempt) {
    auto* backend = static_cast<SqliteBackend*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (attempt == 0) backend->busy_since_ = now;
    const auto waited = now - backend->busy_since_;
    if (waited >= backend->busy_timeout_) return 0;
    std::this_thread::sleep_for(waited < milliseconds(2) ? std::chrono::microseconds(200)
                                                         : std::chrono::microseconds(1'000));
    return 1;
  }

  bool PastDeadline(const ClaimRequest& req) const {
    return clock_.Wall() >
           WallTime(std::chrono::seconds(req.tick_unix)) + req.starting_deadline.value();
  }

  Result<std::vector<TickHistory>> HistoryLocked(std::string_view job, int limit,
                                                 const std::string& where) {
    // The newest `limit` of each table first (an index walk each), then of their
    // union: a UNION of the whole tables sorted on every call grew with the ledger
    // (0.36 s at 200,000 ticks) and the skew watch runs it twice a second.
    const char* const kAllJobs =
        "SELECT job, tick FROM (SELECT job, tick FROM tickd_ticks ORDER BY tick DESC, job "
        "LIMIT ?2) UNION SELECT job, tick FROM (SELECT DISTINCT job, tick FROM "
        "tickd_observations ORDER BY tick DESC, job LIMIT ?2) ORDER BY tick DESC, job LIMIT ?2";
    const char* const kOneJob =
        "SELECT job, tick FROM (SELECT job, tick FROM tickd_ticks WHERE job = ?1 ORDER BY "
        "tick DESC LIMIT ?2) UNION SELECT job, tick FROM (SELECT DISTINCT job, tick FROM "
        "tickd_observations WHERE job = ?1 ORDER BY tick DESC LIMIT ?2) ORDER BY tick DESC "
        "LIMIT ?2";
    Stmt keys(stmts_, db_, job.empty() ? kAllJobs : kOneJob);
    if (!job.empty()) keys.Bind(1, job);
    keys.Bind(2, static_cast<std::int64_t>(limit));
    std::vector<TickHistory> out;
    while (keys.Step() == SQLITE_ROW) {
      TickHistory h;
      h.job = keys.Text(0);
      h.tick_unix = keys.Int(1);
      out.push_back(std::move(h));
    }
    if (keys.Failed()) return MakeError(where, keys.ErrorText());
    for (TickHistory& h : out) {
      Stmt rec(stmts_, db_,
               "SELECT node, state, run_outcome, exit_code, duration_ms, fence, config_hash "
               "FROM tickd_ticks WHERE job = ?1 AND tick = ?2");
      rec.Bind(1, h.job).Bind(2, h.tick_unix);
      if (rec.Step() == SQLITE_ROW) {
        h.winner = rec.Text(0);
        h.state = rec.Text(1);
        h.run_outcome = rec.Text(2);
        if (!rec.IsNull(3)) h.exit_code = static_cast<int>(rec.Int(3));
        h.duration = milliseconds(rec.Int(4));
        h.fence = static_cast<std::uint64_t>(rec.Int(5));
        h.config_hash = rec.Text(6);
      }
      if (rec.Failed()) return MakeError(where, rec.ErrorText());
      Stmt obs(stmts_, db_,
               "SELECT node, outcome, node_wall_ms, config_hash, fence FROM tickd_observations "
               "WHERE job = ?1 AND tick = ?2 ORDER BY node_wall_ms, node");
      obs.Bind(1, h.job).Bind(2, h.tick_unix);
      while (obs.Step() == SQLITE_ROW) {
        Observation o;
        o.job = h.job;
        o.tick_unix = h.tick_unix;
        o.node = obs.Text(0);
        o.outcome = obs.Text(1);
        o.node_wall = WallTime(milliseconds(obs.Int(2)));
        o.config_hash = obs.Text(3);
        o.fence = static_cast<std::uint64_t>(obs.Int(4));
        h.observations.push_back(std::move(o));
      }
      if (obs.Failed()) return MakeError(where, obs.ErrorText());
    }
    return out;
  }

  // Inside the caller's BEGIN IMMEDIATE: no claim, renew or complete runs meanwhile.
  Result<ForceReleaseStatus> ForceReleaseLocked(std::string_view job, std::int64_t tick_unix,
                                                const std::string& where) {
    const std::int64_t now = HostBootMs();
    std::optional<Running> rec;
    {
      Stmt st(db_,
              "SELECT tick, owner, node, fence, lease_until, boot_id, config_hash "
              "FROM tickd_ticks WHERE job = ?1 AND tick = ?2 AND state = 'running'");
      st.Bind(1, job).Bind(2, tick_unix);
      const int rc = st.Step();
      if (rc == SQLITE_ROW) rec = ReadRunning(st);
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return MakeError(where, st.ErrorText());
    }
    if (!rec) return ForceReleaseStatus::kNotRunning;
    if (Live(*rec, now)) return ForceReleaseStatus::kHolderAlive;
    Stmt st(db_,
            "UPDATE tickd_ticks SET state = 'done', run_outcome = 'released', owner = '', "
            "lease_until = ?1 WHERE job = ?2 AND tick = ?3 AND owner = ?4 AND state = 'running'");
    st.Bind(1, now).Bind(2, job).Bind(3, tick_unix).Bind(4, rec->owner);
    if (st.Step() != SQLITE_DONE) return MakeError(where, st.ErrorText());
    if (auto r = Exec("COMMIT", where); !r) return tl::unexpected(r.error());
    return ForceReleaseStatus::kReleased;
  }

  Result<int> PruneLocked(WallTime older_than, const std::string& where) {
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    const std::int64_t now = HostBootMs();
    int removed = 0;
    // Running records go only when dead.
    std::vector<std::pair<std::string, Running>> dead;
    {
      Stmt running(db_,
                   "SELECT tick, owner, node, fence, lease_until, boot_id, config_hash, job "
                   "FROM tickd_ticks WHERE state = 'running' AND tick < ?1");
      running.Bind(1, cutoff);
      while (running.Step() == SQLITE_ROW) {
        Running rec = ReadRunning(running);
        if (!Live(rec, now)) dead.emplace_back(running.Text(7), std::move(rec));
      }
      if (running.Failed()) return MakeError(where, running.ErrorText());
    }
    for (const auto& [job, rec] : dead) {
      Stmt del(db_, "DELETE FROM tickd_ticks WHERE job = ?1 AND tick = ?2 AND owner = ?3");
      del.Bind(1, job).Bind(2, rec.tick).Bind(3, rec.owner);
      if (del.Step() != SQLITE_DONE) return MakeError(where, del.ErrorText());
      removed += sqlite3_changes(db_);
    }
    Stmt done(db_, "DELETE FROM tickd_ticks WHERE state = 'done' AND tick < ?1");
    done.Bind(1, cutoff);
    if (done.Step() != SQLITE_DONE) return MakeError(where, done.ErrorText());
    removed += sqlite3_changes(db_);
    Stmt obs(db_, "DELETE FROM tickd_observations WHERE tick < ?1");
    obs.Bind(1, cutoff);
    if (obs.Step() != SQLITE_DONE) return MakeError(where, obs.ErrorText());
    // Outputs belong to done records only, so none of a live run goes here.
    Stmt outputs(db_, "DELETE FROM tickd_outputs WHERE tick < ?1");
    outputs.Bind(1, cutoff);
    if (outputs.Step() != SQLITE_DONE) return MakeError(where, outputs.ErrorText());
    if (auto r = Exec("COMMIT", where); !r) return tl::unexpected(r.error());
    return removed;
  }

  void CheckFileSystem() {
    std::string dir = path_.substr(0, path_.find_last_of('/') + 1);
    if (dir.empty()) dir = ".";
    struct statfs fs {};
    if (::statfs(dir.c_str(), &fs) != 0) return;
    if (auto remote = RemoteFileSystemName(static_cast<long>(fs.f_type))) {
      warnings_.push_back(
          "sqlite: " + path_ + " is on a network file system (" + std::string(*remote) +
          "): SQLite's WAL and the holder locks need one local host; use a local path, "
          "or a server backend (postgres, etcd, zookeeper) for several hosts");
    }
  }

  Clock& clock_;
  const std::string path_;
  const std::string locks_dir_;
  const std::string boot_id_;
  dev_t file_dev_ = 0;  // the file the path named at Open (StillThePathsFile)
  ino_t file_ino_ = 0;
  std::mutex mu_;
  sqlite3* db_ = nullptr;
  StmtCache stmts_{db_};  // before holder_locks_/held_; finalized before db_ closes
  HolderLocks holder_locks_;
  std::map<std::string, std::uint64_t> held_;  // owner token → fence of a claim we hold
  int wal_pages_ = 0;  // frames in the WAL after our last commit (the WAL hook)
  milliseconds busy_timeout_{2'000};
  std::chrono::steady_clock::time_point busy_since_;  // OnBusy: when the current wait began
  std::vector<std::string> warnings_;
  CompleteBatcher completer_{
      [this](std::span<const CompleteRequest> reqs) { return CompleteBatch(reqs); }};
};

}  // namespace

Result<std::unique_ptr<Backend>> NewSqliteBackend(const SqliteOptions& options, Clock& clock) {
  if (options.path.empty()) return MakeError("sqlite", "no database path");
  auto backend = std::make_unique<SqliteBackend>(
      clock, options.path, options.boot_id.empty() ? ReadBootId() : options.boot_id);
  if (auto r = backend->Open(options); !r) return tl::unexpected(r.error());
  return backend;
}

Result<std::string> SqlitePathFromUrl(std::string_view url) {
  constexpr std::string_view kPrefix = "sqlite://";
  std::string_view path = url;
  if (url.substr(0, kPrefix.size()) == kPrefix) {
    path = url.substr(kPrefix.size());
  } else if (url.find("://") != std::string_view::npos) {
    return MakeError("sqlite: " + std::string(url), "not a sqlite:// URL");
  }
  if (path.empty()) return MakeError("sqlite: " + std::string(url), "no database path");
  return std::string(path);
}

std::optional<std::string_view> RemoteFileSystemName(long f_type) {
  switch (static_cast<unsigned long>(f_type) & 0xFFFFFFFFUL) {
    case NFS_SUPER_MAGIC:
      return "nfs";
    case SMB_SUPER_MAGIC:
      return "smb";
    case 0xFF534D42UL:  // CIFS_MAGIC_NUMBER
      return "cifs";
    case 0xFE534D42UL:  // SMB2_MAGIC_NUMBER
      return "smb2";
    case AFS_SUPER_MAGIC:
      return "afs";
    case CODA_SUPER_MAGIC:
      return "coda";
    case 0x00C36400UL:  // CEPH_SUPER_MAGIC
      return "ceph";
    case V9FS_MAGIC:
      return "9p";
    default:
      return std::nullopt;
  }
}

}  // namespace tickd::lock
