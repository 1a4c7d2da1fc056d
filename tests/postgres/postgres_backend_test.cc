// PostgreSQL-specific behaviour beyond the shared conformance suite: the schema made
// on first use and versioned, passwords kept out of errors, batched claims (store-reset
// claim by claim), Prune keeping each job's latest record, lost answered before missed,
// fences across a server crash, failing closed within op_timeout, the database's clock
// ruling (a server running 2x fast under libfaketime), and the negative control that
// shows why leases live in a table and not in advisory locks. Each test starts its own
// server or uses the shared one.
#include "lock/postgres/postgres_backend.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "lock/registry.h"
#include "tests/postgres/postgres_server.h"
#include "tests/support/claims.h"

using namespace std::chrono_literals;
using tickd::WallTime;
using tickd::testing::NowUnix;
using tickd::testing::PostgresServer;
using namespace tickd::lock;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::Req;
using std::chrono::steady_clock;

namespace {

bool Available() {
  if (!PostgresServer::Available()) WARN("postgres 15 not installed: postgres tests skipped");
  return PostgresServer::Available();
}

// One server for the tests that do not harm it; each takes a fresh database.
PostgresServer& Shared() {
  static PostgresServer server;
  INFO(server.LogTail());
  REQUIRE(server.running());
  return server;
}

std::string FreshDb(const PostgresServer& server) {
  static std::atomic<int> n{0};
  const std::string db = "t" + std::to_string(::getpid()) + "_" + std::to_string(++n);
  std::string error;
  if (!server.CreateDatabase(db, &error)) FAIL("CREATE DATABASE: " << error << server.LogTail());
  return db;
}

PostgresOptions OptionsFor(const PostgresServer& server, const std::string& db) {
  PostgresOptions options;
  options.url = server.url(db);
  options.password = server.password();
  options.op_timeout = 1s;
  return options;
}

std::unique_ptr<Backend> Open(const PostgresOptions& options) {
  auto backend = NewPostgresBackend(options);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

// A plain libpq session (not a Backend), for the advisory-lock control.
class Session {
 public:
  Session(const PostgresServer& server, const std::string& db, const std::string& app)
      : conn_(nullptr, &PQfinish) {
    const std::string port = std::to_string(server.port());
    const char* keys[] = {"host", "port", "dbname", "user", "password", "application_name",
                          nullptr};
    const char* values[] = {
        "127.0.0.1", port.c_str(), db.c_str(), PostgresServer::kUser, server.password().c_str(),
        app.c_str(), nullptr};
    conn_.reset(PQconnectdbParams(keys, values, 0));
    REQUIRE(PQstatus(conn_.get()) == CONNECTION_OK);
  }
  // The first column of the first row; nullopt when the statement failed.
  std::optional<std::string> Query(const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn_.get(), sql.c_str()), &PQclear);
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) < 1) return std::nullopt;
    return std::string(PQgetvalue(r.get(), 0, 0));
  }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn_;
};

}  // namespace

TEST_CASE(
    "postgres: replicas starting together create the tables once; a newer schema is "
    "refused",
    "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (NewPostgresBackend(OptionsFor(server, db))) ++opened;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(opened == 4);
  CHECK(server.Query("SELECT string_agg(version::text, ',') FROM tickd_schema", db) == "4");
  // The claim (twelve arguments: the clock check), the version-4 call (ten) and the
  // version-3 call (nine) kept for older replicas.
  CHECK(server.Query("SELECT string_agg(pronargs::text, ',' ORDER BY pronargs) FROM pg_proc "
                     "WHERE proname = 'tickd_claim'",
                     db) == "9,10,12");
  // An older replica's ten-argument call checks no clock: a tick an hour ahead is won.
  const std::string hour_ahead = std::to_string(NowUnix() + 3600);
  CHECK(server.Query("SELECT status FROM tickd_claim('old-ahead', " + hour_ahead +
                         ", 'node-old', 'tok-old', 30000, NULL, true, false, 'hash', 0)",
                     db) == "won");

  // A version-1 database (tables, no claim function yet) is migrated on connect.
  REQUIRE(server.Query(
      "DROP FUNCTION tickd_claim(text, bigint, text, text, bigint, bigint, boolean, boolean, "
      "text), tickd_claim(text, bigint, text, text, bigint, bigint, boolean, boolean, text, "
      "bigint); UPDATE tickd_schema SET version = 1",
      db));
  auto migrated = Open(OptionsFor(server, db));
  CHECK(server.Query("SELECT version FROM tickd_schema", db) == "4");
  CHECK(MustClaim(*migrated, Req("migrated", NowUnix(), "node-a", "tok")).status ==
        ClaimStatus::kWon);

  // A version-3 database: its claim function takes nine arguments (a stand-in here that
  // answers "v3"). The migration replaces it, so a replica of the older tickd still
  // connected claims through the new function, knowing nothing (known_tick 0).
  REQUIRE(server.Query(
      "DROP FUNCTION tickd_claim(text, bigint, text, text, bigint, bigint, boolean, boolean, "
      "text, bigint); "
      "CREATE OR REPLACE FUNCTION tickd_claim(p_job text, p_tick bigint, p_node text, "
      "p_owner text, p_lease_ms bigint, p_deadline_ms bigint, p_forbid boolean, "
      "p_recover boolean, p_hash text, OUT status text, OUT fence bigint, "
      "OUT holder_node text, OUT holder_tick bigint, OUT holder_hash text, "
      "OUT holder_running boolean) LANGUAGE sql AS "
      "$$ SELECT 'v3', 0::bigint, '', 0::bigint, '', false $$; "
      "UPDATE tickd_schema SET version = 3",
      db));
  auto from_v3 = Open(OptionsFor(server, db));
  CHECK(server.Query("SELECT version FROM tickd_schema", db) == "4");
  CHECK(server.Query("SELECT count(*) FROM pg_proc WHERE proname = 'tickd_claim'", db) == "3");
  const std::string t = std::to_string(NowUnix());
  CHECK(server.Query("SELECT status FROM tickd_claim('old-replica', " + t +
                         ", 'node-old', 'tok-old', 30000, NULL, true, false, 'hash')",
                     db) == "won");
  auto knows = Req("old-replica", NowUnix() + 1, "node-a", "tok-new");
  knows.known_tick = NowUnix() + 60;
  CHECK(MustClaim(*from_v3, knows).status == ClaimStatus::kStoreReset);
  knows.known_tick = std::stoll(t);
  CHECK(MustClaim(*from_v3, knows).status == ClaimStatus::kBusy);  // tok-old still runs

  REQUIRE(server.Query("UPDATE tickd_schema SET version = 5", db));
  auto newer = NewPostgresBackend(OptionsFor(server, db));
  REQUIRE_FALSE(newer);
  CHECK_THAT(newer.error().ToString(), Catch::Contains("schema version 5"));
}

TEST_CASE("postgres: output round-trips byte for byte on a LATIN1 database, whatever "
          "PGCLIENTENCODING says",
          "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = "latin1_" + std::to_string(::getpid());
  std::string error;
  if (!server.Query("CREATE DATABASE \"" + db +
                        "\" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0",
                    "postgres", &error)) {
    FAIL("CREATE DATABASE: " << error);
  }
  // An operator's environment asking libpq to convert to UTF8: on a LATIN1 database the
  // server would refuse the € (LATIN1 has none) and the complete would fail.
  const char* before = std::getenv("PGCLIENTENCODING");
  const std::string saved = before == nullptr ? "" : before;
  ::setenv("PGCLIENTENCODING", "UTF8", 1);
  auto b = Open(OptionsFor(server, db));
  const auto req = Req("printer", NowUnix(), "node-a", "tok");
  const ClaimOutcome won = MustClaim(*b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  Completion done{"done", 0, 5ms};
  done.output = "o caf\xC3\xA9 costs 3 \xE2\x82\xAC\ne \xE2\x9C\x93\n";
  done.keep_outputs = 5;
  const auto completed = b->Complete(HeldOf(req, won), done);
  if (before == nullptr) {
    ::unsetenv("PGCLIENTENCODING");
  } else {
    ::setenv("PGCLIENTENCODING", saved.c_str(), 1);
  }
  if (!completed) FAIL(completed.error().ToString());
  CHECK(*completed == CompleteStatus::kCompleted);
  const std::int64_t ticks[] = {req.tick_unix};
  const auto outputs = b->Outputs("printer", ticks);
  if (!outputs) FAIL(outputs.error().ToString());
  REQUIRE(outputs->size() == 1);
  CHECK(outputs->front() == done.output);
}

TEST_CASE("postgres: passwords stay out of errors; the URL's password wins", "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  const std::string wrong = "Wr0ng-pa55-xyz";

  auto options = OptionsFor(server, db);
  options.password = wrong;
  auto refused = NewPostgresBackend(options);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().ToString(), Catch::Contains("authentication failed"));
  CHECK_THAT(refused.error().ToString(), !Catch::Contains(wrong));

  options.url =
      "postgres://tickd:" + wrong + "@127.0.0.1:" + std::to_string(server.port()) + "/" + db;
  options.password = server.password();  // the URL's password is the one used
  refused = NewPostgresBackend(options);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().ToString(), !Catch::Contains(wrong));
  CHECK_THAT(refused.error().ToString(), Catch::Contains("tickd:***@"));

  options.url = "postgres://tickd:" + server.password() +
                "@127.0.0.1:" + std::to_string(server.port()) + "/" + db;
  options.password = wrong;
  CHECK(NewPostgresBackend(options));

  options.url = "postgres://tickd:" + wrong + "%zz@127.0.0.1/" + db;  // a bad escape
  refused = NewPostgresBackend(options);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().ToString(), !Catch::Contains(wrong));

  options.url = "mysql://127.0.0.1/" + db;
  CHECK_FALSE(NewPostgresBackend(options));

  // Through the registry, under both schemes.
  tickd::RealClock clock;
  BackendOptions by_name;
  by_name.backend = "postgres";
  by_name.url = "postgresql://tickd@127.0.0.1:" + std::to_string(server.port()) + "/" + db;
  by_name.password = server.password();
  auto opened = OpenBackend(by_name, clock);
  REQUIRE(opened);
  CHECK((*opened)->name() == "postgres");
}

TEST_CASE("postgres: ClaimBatch answers every claim in order in one transaction", "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  auto a = Open(OptionsFor(server, db));
  auto b = Open(OptionsFor(server, db));
  const std::int64_t t0 = NowUnix();
  std::vector<ClaimRequest> reqs;
  for (int j = 0; j < 20; ++j) {
    for (int t = 0; t < 2; ++t) {
      auto req =
          Req("job-" + std::to_string(j), t0 + t, "node-a", "a-" + std::to_string(j * 2 + t));
      req.forbid_overlap = false;
      reqs.push_back(req);
    }
  }
  std::reverse(reqs.begin(), reqs.end());  // not in (job, tick) order: answers still are
  // One claim the database rejects (an interval out of range) fails the whole batch
  // closed: nothing of it happened.
  auto bad = reqs;
  bad[7].lease = milliseconds(std::numeric_limits<std::int64_t>::max());
  for (const auto& out : a->ClaimBatch(bad)) {
    REQUIRE_FALSE(out);
    CHECK_THAT(out.error().ToString(), Catch::Contains("interval out of range"));
  }

  const auto won = a->ClaimBatch(reqs);
  REQUIRE(won.size() == reqs.size());
  std::set<std::uint64_t> fences;
  for (std::size_t i = 0; i < won.size(); ++i) {
    INFO("claim " << i << ": " << (won[i] ? "" : won[i].error().ToString()));
    REQUIRE(won[i]);
    CHECK(won[i]->status == ClaimStatus::kWon);
    fences.insert(won[i]->fence);
  }
  CHECK(fences.size() == reqs.size());
  // Fences follow the ticks of a job, whatever the order of the batch.
  CHECK(won[0]->fence > won[1]->fence);  // job-19 at t0+1, then job-19 at t0
  const auto a_reqs = reqs;
  for (ClaimRequest& req : reqs) {
    req.node = "node-b";
    req.owner_token = "b-" + req.owner_token;
    req.observe = true;  // the ledger row rides with the claim
  }
  const auto lost = b->ClaimBatch(reqs);
  REQUIRE(lost.size() == reqs.size());
  for (std::size_t i = 0; i < lost.size(); ++i) {
    INFO("claim " << i);
    REQUIRE(lost[i]);
    CHECK(lost[i]->observed);
    CHECK(lost[i]->status == ClaimStatus::kLost);
    CHECK(lost[i]->holder_node == "node-a");
    CHECK(lost[i]->holder_running);
  }
  auto history = a->History("job-5", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  REQUIRE(history->front().observations.size() == 1);
  CHECK(history->front().observations.front().node == "node-b");
  CHECK(history->front().observations.front().outcome == "lost");

  // CompleteBatch: A's wins completed in one call; B's token is not the owner.
  std::vector<CompleteRequest> completes;
  for (std::size_t i = 0; i < 4; ++i) {
    const ClaimRequest& req = i == 3 ? reqs[0] : a_reqs[i];
    completes.push_back({HeldOf(req, *won[i == 3 ? 0 : i]), Completion{"done", 0, 1ms}});
  }
  const auto completed = a->CompleteBatch(completes);
  REQUIRE(completed.size() == 4);
  for (std::size_t i = 0; i < 3; ++i) CHECK(*completed[i] == CompleteStatus::kCompleted);
  CHECK(*completed[3] == CompleteStatus::kNotOwner);
  history = a->History("job-19", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  CHECK(history->front().state == "done");
}

TEST_CASE("postgres: ClaimBatch answers store-reset claim by claim and writes nothing for them",
          "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  auto a = Open(OptionsFor(server, db));
  const std::int64_t t0 = NowUnix();
  for (const std::string job : {"known", "forgotten"}) {
    auto first = Req(job, t0, "node-a", "tok-" + job);
    first.forbid_overlap = false;
    REQUIRE(MustClaim(*a, first).status == ClaimStatus::kWon);
  }
  // The batch: a claim that knows what the store knows, one that knows more, one of a
  // job the store never saw; sorted by (job, tick) inside, answered in this order.
  std::vector<ClaimRequest> reqs = {Req("known", t0 + 1, "node-b", "tok-b1"),
                                    Req("forgotten", t0 + 1, "node-b", "tok-b2"),
                                    Req("never", t0 + 1, "node-b", "tok-b3")};
  reqs[0].known_tick = t0;
  reqs[1].known_tick = t0 + 5;
  reqs[2].known_tick = t0 - 60;
  for (ClaimRequest& req : reqs) {
    req.forbid_overlap = false;
    req.observe = true;
  }
  const auto out = a->ClaimBatch(reqs);
  REQUIRE(out.size() == 3);
  for (const auto& o : out) REQUIRE(o);
  CHECK(out[0]->status == ClaimStatus::kWon);
  CHECK(out[0]->observed);
  CHECK(out[1]->status == ClaimStatus::kStoreReset);
  CHECK(out[1]->holder_tick_unix == t0);
  CHECK_FALSE(out[1]->observed);
  CHECK(out[2]->status == ClaimStatus::kStoreReset);
  CHECK(out[2]->holder_tick_unix == 0);
  CHECK_FALSE(out[2]->observed);
  CHECK(server.Query("SELECT count(*) FROM tickd_ticks WHERE job <> 'known'", db) == "1");
  CHECK(server.Query("SELECT string_agg(job, ',') FROM tickd_observations", db) == "known");
}

TEST_CASE(
    "postgres: Prune keeps each job's latest record, however old, so the next claim that "
    "knows it wins",
    "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  auto a = Open(OptionsFor(server, db));
  const std::int64_t now = NowUnix();
  const std::int64_t last_year = now - 366 * 86400;
  auto run = [&](const std::string& job, std::int64_t tick) {
    auto req = Req(job, tick, "node-a", "tok-" + job + std::to_string(tick));
    req.starting_deadline = std::nullopt;
    req.forbid_overlap = false;
    req.observe = true;
    const ClaimOutcome won = MustClaim(*a, req);
    REQUIRE(won.status == ClaimStatus::kWon);
    REQUIRE(*a->Complete(HeldOf(req, won), Completion{"done", 0, 1ms}) ==
            CompleteStatus::kCompleted);
  };
  run("yearly", last_year);
  run("hourly", now - 7200);
  run("hourly", now - 3700);

  auto removed = a->Prune(WallTime(std::chrono::seconds(now - 3600)));
  REQUIRE(removed);
  CHECK(*removed == 1);  // hourly@now-7200; each job's latest stays, with its ledger
  auto yearly = a->History("yearly", 10);
  REQUIRE(yearly);
  REQUIRE(yearly->size() == 1);
  CHECK(yearly->front().tick_unix == last_year);
  CHECK(yearly->front().observations.size() == 1);
  auto hourly = a->History("hourly", 10);
  REQUIRE(hourly);
  REQUIRE(hourly->size() == 1);
  CHECK(hourly->front().tick_unix == now - 3700);
  CHECK(server.Query("SELECT count(*) FROM tickd_observations", db) == "2");
  // Still the job's claim head: an earlier tick is superseded, not claimed.
  auto earlier = Req("yearly", last_year - 60, "node-b", "tok-earlier");
  earlier.starting_deadline = std::nullopt;
  CHECK(MustClaim(*a, earlier).status == ClaimStatus::kSuperseded);

  // The replicas knew these ticks: the pruned store still knows them, no store-reset.
  auto next = Req("yearly", now, "node-b", "tok-next");
  next.known_tick = last_year;
  CHECK(MustClaim(*a, next).status == ClaimStatus::kWon);
  next = Req("hourly", now, "node-b", "tok-next-hourly");
  next.known_tick = now - 3700;
  CHECK(MustClaim(*a, next).status == ClaimStatus::kWon);
  // Control: without the kept record, the same claim would hear store-reset.
  REQUIRE(server.Query("DELETE FROM tickd_ticks WHERE job = 'yearly'", db));
  next = Req("yearly", now + 1, "node-b", "tok-after-delete");
  next.known_tick = last_year;
  CHECK(MustClaim(*a, next).status == ClaimStatus::kStoreReset);
}

TEST_CASE("postgres: an existing tick answers lost before missed; a retried claim keeps its fence",
          "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  auto a = Open(OptionsFor(server, db));
  auto b = Open(OptionsFor(server, db));
  const std::int64_t old_tick = NowUnix() - 3600;
  auto first = Req("catch-up", old_tick, "node-a", "tok-a");
  first.starting_deadline = std::nullopt;
  const ClaimOutcome won = MustClaim(*a, first);
  REQUIRE(won.status == ClaimStatus::kWon);
  // The same token again (a reply lost in transit, then retried): still ours, same fence.
  const ClaimOutcome again = MustClaim(*a, first);
  CHECK(again.status == ClaimStatus::kWon);
  CHECK(again.fence == won.fence);

  auto late = Req("catch-up", old_tick, "node-b", "tok-b");
  late.starting_deadline = 60s;
  ClaimOutcome out = MustClaim(*b, late);
  CHECK(out.status == ClaimStatus::kLost);  // not missed: the winner is named
  CHECK(out.holder_node == "node-a");
  CHECK(out.holder_running);
  REQUIRE(*a->Complete(HeldOf(first, won), Completion{"done", 0, 5ms}) ==
          CompleteStatus::kCompleted);
  REQUIRE(*a->Complete(HeldOf(first, won), Completion{"done", 0, 5ms}) ==
          CompleteStatus::kCompleted);  // repeated: still completed
  out = MustClaim(*b, late);
  CHECK(out.status == ClaimStatus::kLost);
  CHECK_FALSE(out.holder_running);
  CHECK(MustClaim(*b, Req("catch-up", old_tick + 60, "node-b", "tok-c")).status ==
        ClaimStatus::kMissed);

  const auto warnings = a->StartupWarnings();  // the test server runs with fsync=off
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings.front(), Catch::Contains("fsync=off"));
}

TEST_CASE("postgres: locks lists running claims; a release waits for the lease to expire",
          "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  auto a = Open(OptionsFor(server, FreshDb(server)));
  const std::int64_t tick = NowUnix();
  auto req = Req("stuck", tick, "node-a", "tok-a");
  req.lease = 400ms;
  REQUIRE(MustClaim(*a, req).status == ClaimStatus::kWon);
  auto running = a->ListRunning();
  REQUIRE(running);
  REQUIRE(running->size() == 1);
  CHECK(running->front().node == "node-a");
  CHECK(running->front().holder_alive);
  CHECK(running->front().lease_left > 0ms);
  CHECK(*a->ForceRelease("stuck", tick) == ForceReleaseStatus::kHolderAlive);
  std::this_thread::sleep_for(500ms);
  running = a->ListRunning();
  REQUIRE(running);
  REQUIRE(running->size() == 1);
  CHECK_FALSE(running->front().holder_alive);
  CHECK(running->front().lease_left == 0ms);
  CHECK(*a->ForceRelease("stuck", tick) == ForceReleaseStatus::kReleased);
  CHECK(*a->ForceRelease("stuck", tick) == ForceReleaseStatus::kNotRunning);
  auto history = a->History("stuck", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().run_outcome == "released");
  CHECK(a->ListRunning()->empty());
}

TEST_CASE("postgres: negative control — a killed session frees an advisory lock, never a lease",
          "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  auto terminate = [&](const std::string& app) {
    return server.Query(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = '" +
            app + "'",
        db);
  };

  SECTION("advisory lock: a second replica acquires while the first still runs") {
    Session first(server, db, "advisory-a");
    Session second(server, db, "advisory-b");
    REQUIRE(first.Query("SELECT pg_try_advisory_lock(4242)") == "t");
    REQUIRE(second.Query("SELECT pg_try_advisory_lock(4242)") == "f");
    // The holder's session dies (an admin, a pooler, a network cut); its process does
    // not know and goes on running the job.
    REQUIRE(terminate("advisory-a") == "1");
    bool second_acquired = false;
    for (int i = 0; i < 100 && !second_acquired; ++i) {
      second_acquired = second.Query("SELECT pg_try_advisory_lock(4242)") == "t";
      if (!second_acquired) std::this_thread::sleep_for(20ms);
    }
    CHECK(second_acquired);  // two holders at once: the defect the lease table avoids
  }

  SECTION("lease table: the second replica cannot win the tick while the lease lives") {
    auto options_a = OptionsFor(server, db);
    options_a.url += "?application_name=tickd-a";
    auto a = Open(options_a);
    auto b = Open(OptionsFor(server, db));
    const std::int64_t tick = NowUnix();
    auto req_a = Req("exclusive", tick, "node-a", "tok-a");
    req_a.lease = 1500ms;
    req_a.recover = true;
    const ClaimOutcome won = MustClaim(*a, req_a);
    REQUIRE(won.status == ClaimStatus::kWon);
    REQUIRE(terminate("tickd-a") == "1");
    auto req_b = Req("exclusive", tick, "node-b", "tok-b");
    req_b.lease = 1500ms;
    req_b.recover = true;
    const ClaimOutcome lost = MustClaim(*b, req_b);
    CHECK(lost.status == ClaimStatus::kLost);
    CHECK(lost.holder_node == "node-a");
    CHECK(lost.holder_running);
    // A renews on a new session: the lease, not the session, is the claim.
    CHECK(*a->Renew(HeldOf(req_a, won)) == RenewStatus::kRenewed);
    CHECK(MustClaim(*b, req_b).status == ClaimStatus::kLost);
    // Only when A stops renewing does the lease expire on the database's clock.
    std::this_thread::sleep_for(1700ms);
    const ClaimOutcome taken = MustClaim(*b, req_b);
    REQUIRE(taken.status == ClaimStatus::kWon);
    CHECK(taken.fence > won.fence);
    CHECK(*a->Renew(HeldOf(req_a, won)) == RenewStatus::kLost);
  }
}

TEST_CASE(
    "postgres: fences survive a server crash; calls fail closed within op_timeout while "
    "it is down or frozen; replicas reconnect by themselves",
    "[postgres]") {
  if (!Available()) return;
  PostgresServer server;
  REQUIRE(server.running());
  auto options = OptionsFor(server, "postgres");
  auto a = Open(options);
  const std::int64_t t0 = NowUnix() + 10;
  std::uint64_t before = 0;
  for (int i = 0; i < 3; ++i) {
    const auto req = Req("durable", t0 + i, "node-a", "tok-" + std::to_string(i));
    const ClaimOutcome won = MustClaim(*a, req);
    REQUIRE(won.status == ClaimStatus::kWon);
    before = std::max(before, won.fence);
    REQUIRE(*a->Complete(HeldOf(req, won), Completion{"done", 0, 1ms}) ==
            CompleteStatus::kCompleted);
  }
  auto claim_until_answered = [&](const ClaimRequest& req) {
    for (int i = 0; i < 60; ++i) {
      if (auto out = a->Claim(req)) return *out;
      std::this_thread::sleep_for(100ms);
    }
    FAIL("no answer after the server came back");
    return ClaimOutcome{};
  };

  server.Kill();
  auto start = steady_clock::now();
  CHECK_FALSE(a->Claim(Req("durable", t0 + 3, "node-a", "tok-down")));
  CHECK(steady_clock::now() - start < options.op_timeout + 1s);
  REQUIRE(server.Start());
  const ClaimOutcome after = claim_until_answered(Req("durable", t0 + 4, "node-a", "tok-4"));
  REQUIRE(after.status == ClaimStatus::kWon);
  CHECK(after.fence > before);
  CHECK(MustClaim(*a, Req("durable", t0, "node-a", "tok-x")).status == ClaimStatus::kLost);

  server.Pause();
  start = steady_clock::now();
  const auto frozen = a->Renew(HeldOf(Req("durable", t0 + 4, "node-a", "tok-4"), after));
  const auto waited = steady_clock::now() - start;
  server.Resume();
  CHECK_FALSE(frozen);
  CHECK(waited < options.op_timeout + 1s);
  const ClaimOutcome resumed = claim_until_answered(Req("other", t0, "node-a", "tok-r"));
  CHECK(resumed.status == ClaimStatus::kWon);
  CHECK(resumed.fence > after.fence);
}

TEST_CASE(
    "postgres: the database's clock rules — a server running 2x fast refuses a renew "
    "the replica still thinks in time, and judges missed",
    "[postgres]") {
  if (!Available()) return;
  if (!PostgresServer::FakeTimeAvailable()) {
    WARN("libfaketime not installed: skipped");
    return;
  }
  PostgresServer server("+0 x2");
  INFO(server.LogTail());
  REQUIRE(server.running());
  auto options = OptionsFor(server, "postgres");
  auto a = Open(options);
  auto b = Open(options);
  const std::int64_t tick = NowUnix();
  auto req_a = Req("fast", tick, "node-a", "tok-a");
  req_a.lease = 1000ms;
  req_a.recover = true;
  req_a.forbid_overlap = false;
  const ClaimOutcome won = MustClaim(*a, req_a);
  REQUIRE(won.status == ClaimStatus::kWon);
  const HeldClaim held = HeldOf(req_a, won);

  std::this_thread::sleep_for(300ms);  // 600 ms on the database's clock
  REQUIRE(*a->Renew(held) == RenewStatus::kRenewed);
  // 700 ms later by the replica's clock (within its 1 s lease), 1.4 s by the
  // database's: the lease expired there, so the renew is refused.
  std::this_thread::sleep_for(700ms);
  CHECK(*a->Renew(held) == RenewStatus::kLost);
  auto req_b = req_a;
  req_b.node = "node-b";
  req_b.owner_token = "tok-b";
  const ClaimOutcome taken = MustClaim(*b, req_b);
  CHECK(taken.status == ClaimStatus::kWon);
  CHECK(taken.fence > won.fence);
  CHECK(*a->Complete(held, Completion{"done", 0, 1ms}) == CompleteStatus::kNotOwner);

  // Missed, too, is the database's judgement: once its clock is ahead by `skew`, a
  // tick the replica sees as on time within a skew/2 deadline is missed.
  double skew = 0;
  for (int i = 0; i < 50 && skew < 2.0; ++i) {
    const auto db_now = server.Query("SELECT extract(epoch FROM clock_timestamp())");
    REQUIRE(db_now);
    skew =
        std::stod(*db_now) -
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (skew < 2.0) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(skew >= 2.0);
  auto on_time = Req("fast", NowUnix(), "node-a", "tok-late");
  on_time.forbid_overlap = false;
  on_time.starting_deadline = milliseconds(static_cast<std::int64_t>(skew * 500));
  CHECK(MustClaim(*a, on_time).status == ClaimStatus::kMissed);
}

TEST_CASE(
    "postgres: fences still grow after the database is dropped and created again, and "
    "above the fences of a version-2 database",
    "[postgres]") {
  if (!Available()) return;
  PostgresServer& server = Shared();
  const std::string db = FreshDb(server);
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  auto claim = [&](Backend& b, std::int64_t tick, const std::string& token) {
    auto req = Req("wiped", tick, "node-a", token);
    req.forbid_overlap = false;
    tickd::testing::MustWinHigher(b, req, last);
  };
  {
    auto a = Open(OptionsFor(server, db));
    claim(*a, t0, "tok-0");
    // A version-2 database (no epoch: its fences were the sequence alone) gets its
    // epoch at the migration, and its fences go on growing.
    REQUIRE(server.Query("DROP TABLE tickd_epoch; UPDATE tickd_schema SET version = 2", db));
    auto migrated = Open(OptionsFor(server, db));
    claim(*migrated, t0 + 1, "tok-1");
    claim(*a, t0 + 2, "tok-2");
    CHECK(MustClaim(*a, Req("wiped", t0 - 1, "node-b", "tok-old")).status ==
          ClaimStatus::kSuperseded);
  }
  std::this_thread::sleep_for(5ms);  // the database's clock moves past the old epoch
  REQUIRE(server.Query("DROP DATABASE \"" + db + "\" WITH (FORCE)", "postgres"));
  std::string error;
  REQUIRE(server.CreateDatabase(db, &error));
  auto b = Open(OptionsFor(server, db));
  claim(*b, t0 - 1, "tok-after");  // everything is gone, the fences still grow
  claim(*b, t0, "tok-after-0");
}
