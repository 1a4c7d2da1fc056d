// The PostgreSQL protocol (docs/backends.md, "PostgreSQL 15") — the database's
// clock decides. Replicas share one database; every decision is one statement, so it
// is one transaction on the server, judged by the server's clock (now() /
// clock_timestamp()), never a replica's.
//
// Tables (created on first use; `tickd_schema.version` says which migrations ran, so
// a newer tickd migrates an older database and an older tickd refuses a newer one):
//   tickd_ticks(job, tick)   the tick record AND its lease: owner token, node, fence,
//                            state running|done, lease_until (timestamptz, database
//                            clock), config hash, completion. Kept until Prune, so a
//                            finished tick is never claimed again (the key is the tick);
//                            Prune keeps each job's latest record whatever its age.
//   tickd_fence              a SEQUENCE n: fences strictly increase across every job
//                            and survive restarts (nextval is WAL-logged before the
//                            claim's commit returns).
//   tickd_epoch              ONE row: the database's now() in ms when the table
//                            was created (a new database, or one migrated to version
//                            3). fence = epoch << 11 + n (lock/backend.h): a database
//                            dropped and created again starts at a later epoch, so
//                            its fences are above every fence of the old one; a
//                            version-2 database (fences were n alone) gets its epoch
//                            at migration, and its next fence is above its old ones.
//   tickd_observations(job, tick, node)   the ledger: what each replica saw.
//   tickd_pauses(job)        `tickd pause`: since, until (NULL: until resumed), by,
//                            reason; read before each instant's claims.
//   tickd_claim(...)         a plpgsql function: the whole claim below, server-side
//                            (ten arguments, the last known_tick; the nine-argument
//                            call of schema version 3 stays as a wrapper passing 0,
//                            for older replicas still running in a rolling upgrade).
// The migration runs at every connect inside one transaction that first takes a
// transaction-level advisory lock, so replicas starting together never race on DDL.
// Schema version 4 (this file's kSchemaVersion): a database at an earlier version is
// migrated, a later one refused.
//
// claim = SELECT * FROM tickd_claim(...), one transaction. First
// pg_advisory_xact_lock(job): claims of one job are serialized, so the forbid check and
// the insert below see the same world (without it two claimers of different ticks could
// both see "nothing running" and both win). The lock is transaction-scoped: it never
// stands for a lease (see "advisory locks" below). now = clock_timestamp() taken AFTER
// the lock, so waiting for it never makes a lease look longer or an expiry earlier than
// the database's clock says. Then:
//  −1. max_lead set (the twelve-argument call) and now < T + due_offset − max_lead →
//      early (docs/design.md §1 rule 15): the replica's clock is ahead of the
//      database's. Writes nothing, not even the ledger row;
//   0. known_tick > the job's latest record (max tick; none: 0) → store-reset naming
//      that tick (docs/design.md §1 rule 12): the database lost claims a replica saw
//      (recreated, restored from an old backup). Writes nothing, not even the ledger
//      row of `observe`. Prune keeps each job's latest record, so a job firing less
//      often than the retention is never taken for one the store forgot;
//   1. the record (job, T) exists → lost, naming the winner, holder_running =
//      (state = 'running'); this comes before any deadline, because a late replica
//      must hear who won. Exceptions: our own token still running → won with the
//      stored fence (a claim retried after an ambiguous failure is idempotent);
//      recover on, running, lease_until < now → missed when now > lease_until +
//      starting_deadline, else re-claimed at step 5 (new owner, new fence);
//   2. no record and the job's latest record (read at step 0) is of a later tick
//      (running or done) → superseded, naming it: claims are monotonic per job (one
//      step down the primary key, under the job's lock). For a checked claim whose
//      latest record is further than max_lead ahead of now (claimed for the future
//      by an unchecked claim), the latest record that is not ahead judges instead;
//   3. no record and now > T + starting_deadline → missed;
//   4. forbid and another tick of the job is running with lease_until > now → busy
//      (its node and tick);
//   5. won: INSERT … fence = epoch << 11 + nextval('tickd_fence'), lease_until = now + lease
//      ON CONFLICT DO UPDATE … WHERE state = 'running' AND lease_until < now.
//   Only step 5 waits for the WAL flush (synchronous_commit as configured): a
//   transaction in which no claim won writes no claim (at most ledger rows, best
//   effort), so it commits with synchronous_commit = off. Safe: a committed claim becomes visible
//   only after its flush, so every `lost` names a winner that survives a crash. In
//   a fleet 2 of 3 claims are losers: this is most of the claim throughput.
// renew: UPDATE lease_until = now() + lease WHERE owner = token AND state =
//   'running' AND lease_until > now(): 0 rows = lost (a lease the database saw expire
//   is never revived, whatever the replica's clock says).
// refence (a retry's new fence): UPDATE fence = epoch << 11 + nextval('tickd_fence')
//   WHERE (renew's guard) RETURNING fence: 0 rows = not ours; the lease is unchanged.
// complete: UPDATE state = 'done' … WHERE owner = token AND state = 'running'
//   (never a bare delete); our own record already done counts as completed.
//
// Advisory locks are not used for leases: they carry no fence, and a database
// session that dies (pg_terminate_backend, a proxy timeout, a network cut) frees them
// while the client still runs its job. A lease row outlives the session.
//
// Round trips: every call is one pipeline (libpq pipeline mode). ClaimBatch sends all
// claims of an instant as BEGIN, the claims sorted by (job, tick), COMMIT — one round
// trip and one WAL flush for the batch (a flush per claim made the disk the limit:
// bench/README.md); the sort makes concurrent batches take the per-job locks in one
// order, so they queue, never deadlock. It also decides the ticks of one job in tick
// order, so a batch holding T and T+1 of a job wins both (monotonic), never T+1
// alone with T superseded. The price: the batch commits or fails as a
// whole (one Error for all, fail closed). CompleteBatch does the same. Each claim of a
// batch carries its own known_tick and may hear store-reset alone: it wrote nothing,
// the others of the batch are decided as usual. With ClaimRequest::observe the claim
// statement also writes this replica's ledger row (a data-modifying CTE around
// tickd_claim, skipped for a store-reset): no Record call.
//
// Failures: every call runs against a deadline of op_timeout, connect included
// (non-blocking libpq + poll); the session also carries statement_timeout and
// lock_timeout = op_timeout, so the server abandons what the client gave up on. Any
// I/O error or timeout drops the connection; the next call reconnects, after a
// pause that doubles with each failed attempt (0, 100 ms … 2 s); calls inside the
// pause fail at once. A call that finds a reused connection dead (a server restart,
// a terminated session) reconnects and retries once within its deadline: every
// statement is idempotent for its owner token. An Error from Claim means "unknown":
// the caller does not run (fail closed).
#include "lock/postgres/postgres_backend.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "lock/reconnect.h"
#include "lock/registry.h"

namespace tickd::lock {
namespace {

using std::chrono::steady_clock;
using ConnPtr = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

constexpr int kSchemaVersion = 4;
static_assert(kFenceEpochShift == 11, "tickd_claim shifts the epoch by 11");

// Creates or migrates the tables. One DO block = one statement = one transaction;
// the advisory lock (an arbitrary constant: "tickd" in ASCII) serializes replicas
// that start together. A later version appends `IF v < 5 THEN … END IF;`.
constexpr const char* kMigrate = R"sql(
DO $migrate$
DECLARE
  v int;
BEGIN
  PERFORM pg_advisory_xact_lock(499798025316);
  IF to_regclass('tickd_schema') IS NULL THEN
    CREATE TABLE tickd_schema(version int NOT NULL);
  END IF;
  SELECT max(version) INTO v FROM tickd_schema;
  IF v IS NULL THEN
    INSERT INTO tickd_schema(version) VALUES (0);
    v := 0;
  END IF;
  IF v > 4 THEN
    RAISE EXCEPTION 'the tickd tables are at schema version %, newer than this tickd '
                    'knows (4): upgrade tickd', v;
  END IF;
  -- The claim (the steps at the top of this file), replaced at every connect: the
  -- twelve-argument form checks the clock (docs/design.md §1 rule 15) and answers the
  -- database's clock. Additive, so no new schema version: the ten-argument call of
  -- version 4 stays, as a wrapper that checks no clock, for older replicas still
  -- running in a rolling upgrade (and version 3's nine-argument call wraps that one).
  CREATE OR REPLACE FUNCTION tickd_claim(p_job text, p_tick bigint, p_node text, p_owner text,
      p_lease_ms bigint, p_deadline_ms bigint, p_forbid boolean, p_recover boolean,
      p_hash text, p_known_tick bigint, p_max_lead_ms bigint, p_due_offset_ms bigint,
      OUT status text, OUT fence bigint, OUT holder_node text, OUT holder_tick bigint,
      OUT holder_hash text, OUT holder_running boolean, OUT store_ms bigint)
  LANGUAGE plpgsql AS $claim$
  #variable_conflict use_column
  DECLARE
    rec record;
    now_ts timestamptz;
    head_tick bigint;
    head_node text;
    head_hash text;
  BEGIN
    -- The configured synchronous_commit, kept once per transaction (a batch is one
    -- transaction of many calls); once a call of the transaction won, it stays.
    IF coalesce(current_setting('tickd.sync_commit', true), '') = '' THEN
      PERFORM set_config('tickd.sync_commit', current_setting('synchronous_commit'), true);
    END IF;
    IF coalesce(current_setting('tickd.won', true), '') = '' THEN
      PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('tickd:' || p_job, 0));
    now_ts := clock_timestamp();
    store_ms := floor(extract(epoch FROM now_ts) * 1000)::bigint;
    status := 'lost';
    fence := 0;
    holder_node := '';
    holder_tick := p_tick;
    holder_hash := '';
    holder_running := false;
    -- The replica's clock is ahead of the database's: the tick is not due yet. Nothing
    -- is written (the caller records its observation).
    IF p_max_lead_ms IS NOT NULL AND
       store_ms < p_tick * 1000 + p_due_offset_ms - p_max_lead_ms THEN
      status := 'early';
      RETURN;
    END IF;
    -- The job's latest record: all the store knows of the job (Prune keeps it). Below
    -- what this replica saw claimed, the store lost data: answer before any other
    -- check, and write nothing.
    SELECT t.tick, t.node, t.config_hash INTO head_tick, head_node, head_hash
      FROM tickd_ticks t WHERE t.job = p_job ORDER BY t.tick DESC LIMIT 1;
    IF p_known_tick > coalesce(head_tick, 0) THEN
      status := 'store-reset';
      holder_tick := coalesce(head_tick, 0);
      RETURN;
    END IF;
    SELECT t.owner, t.node, t.fence, t.state, t.lease_until, t.config_hash INTO rec
      FROM tickd_ticks t WHERE t.job = p_job AND t.tick = p_tick;
    IF FOUND THEN
      IF rec.owner = p_owner AND rec.state = 'running' THEN
        status := 'won';
        fence := rec.fence;
        RETURN;
      END IF;
      holder_node := rec.node;
      holder_hash := rec.config_hash;
      holder_running := rec.state = 'running';
      IF rec.state <> 'running' OR NOT p_recover OR rec.lease_until >= now_ts THEN
        RETURN;
      END IF;
      IF p_deadline_ms IS NOT NULL AND
         now_ts > rec.lease_until + p_deadline_ms * interval '1 millisecond' THEN
        status := 'missed';
        RETURN;
      END IF;
    ELSE
      -- A latest record further than max_lead ahead of the clock was claimed for the
      -- future (a wrong clock, an unchecked claim): the latest one that is not ahead
      -- judges instead.
      IF p_max_lead_ms IS NOT NULL AND head_tick * 1000 - p_max_lead_ms > store_ms THEN
        SELECT t.tick, t.node, t.config_hash INTO head_tick, head_node, head_hash
          FROM tickd_ticks t WHERE t.job = p_job AND t.tick > p_tick
            AND t.tick * 1000 - p_max_lead_ms <= store_ms
          ORDER BY t.tick DESC LIMIT 1;
      END IF;
      IF head_tick > p_tick THEN
        status := 'superseded';
        holder_node := head_node;
        holder_tick := head_tick;
        holder_hash := head_hash;
        RETURN;
      END IF;
      IF p_deadline_ms IS NOT NULL AND
         now_ts > to_timestamp(p_tick) + p_deadline_ms * interval '1 millisecond' THEN
        status := 'missed';
        RETURN;
      END IF;
    END IF;
    IF p_forbid THEN
      SELECT t.node, t.tick, t.config_hash INTO rec FROM tickd_ticks t
        WHERE t.job = p_job AND t.state = 'running' AND t.tick <> p_tick
          AND t.lease_until > now_ts
        ORDER BY t.tick DESC LIMIT 1;
      IF FOUND THEN
        status := 'busy';
        holder_node := rec.node;
        holder_tick := rec.tick;
        holder_hash := rec.config_hash;
        holder_running := true;
        RETURN;
      END IF;
    END IF;
    -- A claim is won only once it is on disk (the operator's setting, e.g. on or
    -- remote_apply): a crash must not forget a tick that ran or repeat its fence.
    PERFORM set_config('synchronous_commit', current_setting('tickd.sync_commit'), true);
    PERFORM set_config('tickd.won', 'yes', true);
    INSERT INTO tickd_ticks AS t(job, tick, owner, node, fence, lease_until, config_hash)
      VALUES (p_job, p_tick, p_owner, p_node,
              ((SELECT e.epoch FROM tickd_epoch e LIMIT 1) << 11) + nextval('tickd_fence'),
              now_ts + p_lease_ms * interval '1 millisecond', p_hash)
      ON CONFLICT ON CONSTRAINT tickd_ticks_pkey DO UPDATE
        SET owner = EXCLUDED.owner, node = EXCLUDED.node, fence = EXCLUDED.fence,
            state = 'running', lease_until = EXCLUDED.lease_until,
            config_hash = EXCLUDED.config_hash, exit_code = NULL, run_outcome = '',
            duration_ms = 0
        WHERE t.state = 'running' AND t.lease_until < now_ts
      RETURNING t.fence INTO fence;
    IF FOUND THEN
      status := 'won';
      holder_node := '';
      holder_hash := '';
      holder_running := false;
    END IF;
  END
  $claim$;
  CREATE OR REPLACE FUNCTION tickd_claim(p_job text, p_tick bigint, p_node text, p_owner text,
      p_lease_ms bigint, p_deadline_ms bigint, p_forbid boolean, p_recover boolean,
      p_hash text, p_known_tick bigint, OUT status text, OUT fence bigint,
      OUT holder_node text, OUT holder_tick bigint, OUT holder_hash text,
      OUT holder_running boolean)
  LANGUAGE sql AS $claim4$
    SELECT c.status, c.fence, c.holder_node, c.holder_tick, c.holder_hash, c.holder_running
      FROM tickd_claim(p_job, p_tick, p_node, p_owner, p_lease_ms, p_deadline_ms, p_forbid,
                       p_recover, p_hash, p_known_tick, NULL::bigint, 0::bigint) c
  $claim4$;
  IF v < 1 THEN
    CREATE TABLE tickd_ticks(
      job text NOT NULL,
      tick bigint NOT NULL,                 -- T, seconds since the epoch (UTC)
      owner text NOT NULL,                  -- the holder's token
      node text NOT NULL,
      fence bigint NOT NULL,
      state text NOT NULL DEFAULT 'running',
      lease_until timestamptz NOT NULL,     -- the database's clock
      exit_code int,
      config_hash text NOT NULL DEFAULT '',
      run_outcome text NOT NULL DEFAULT '',
      duration_ms bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (job, tick));
    CREATE INDEX tickd_ticks_running ON tickd_ticks(job) WHERE state = 'running';
    CREATE INDEX tickd_ticks_tick ON tickd_ticks(tick);
    CREATE SEQUENCE tickd_fence;
    CREATE TABLE tickd_observations(
      job text NOT NULL,
      tick bigint NOT NULL,
      node text NOT NULL,
      outcome text NOT NULL,
      node_wall_ms bigint NOT NULL,         -- the replica's wall clock when it tried
      config_hash text NOT NULL DEFAULT '',
      fence bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (job, tick, node));
    CREATE INDEX tickd_observations_tick ON tickd_observations(tick);
    UPDATE tickd_schema SET version = 1;
  END IF;
  IF v < 3 THEN
    -- Version 2: a claim that writes no tick record (lost, busy, missed) commits
    -- without waiting for the WAL flush; only its ledger row could be lost in a crash.
    -- Version 3: claims are monotonic per job (superseded), fences carry an epoch.
    -- (Their claim function is replaced by the one created above.)
    CREATE TABLE IF NOT EXISTS tickd_epoch(epoch bigint NOT NULL);
    INSERT INTO tickd_epoch(epoch) SELECT floor(extract(epoch FROM now()) * 1000)::bigint
      WHERE NOT EXISTS (SELECT 1 FROM tickd_epoch);
    UPDATE tickd_schema SET version = 3;
  END IF;
  IF v < 4 THEN
    -- Version 4: a claim carries known_tick and answers store-reset when the job's
    -- latest record is below it. The claim function (created above) takes one more
    -- argument; the version-3 call (nine arguments) stays as a wrapper that knows
    -- nothing (0), so replicas of an older tickd still running during a rolling
    -- upgrade keep claiming.
    CREATE OR REPLACE FUNCTION tickd_claim(p_job text, p_tick bigint, p_node text,
        p_owner text, p_lease_ms bigint, p_deadline_ms bigint, p_forbid boolean,
        p_recover boolean, p_hash text, OUT status text, OUT fence bigint,
        OUT holder_node text, OUT holder_tick bigint, OUT holder_hash text,
        OUT holder_running boolean)
    LANGUAGE sql AS $claim3$
      SELECT * FROM tickd_claim(p_job, p_tick, p_node, p_owner, p_lease_ms, p_deadline_ms,
                                p_forbid, p_recover, p_hash, 0)
    $claim3$;
    UPDATE tickd_schema SET version = 4;
  END IF;
  -- `tickd pause` (one row per paused job, '*': every job). Additive, so no new schema
  -- version: a replica of an older tickd keeps connecting (it does not honour pauses).
  CREATE TABLE IF NOT EXISTS tickd_pauses(
    job text PRIMARY KEY,
    since_ms bigint NOT NULL,
    until_ms bigint,                        -- NULL: until `tickd resume`
    paused_by text NOT NULL DEFAULT '',
    reason text NOT NULL DEFAULT '');
  -- What finished runs printed (Completion::output), beside their records; additive
  -- like tickd_pauses. Pruned by age with the records, and by count per job.
  CREATE TABLE IF NOT EXISTS tickd_outputs(
    job text NOT NULL,
    tick bigint NOT NULL,
    output text NOT NULL,
    PRIMARY KEY (job, tick));
END
$migrate$)sql";

// The tail of every ledger write: a replica's later word on a tick replaces its earlier.
#define TICKD_OBSERVATION_UPSERT                                               \
  " ON CONFLICT (job, tick, node) DO UPDATE SET outcome = EXCLUDED.outcome, "  \
  "node_wall_ms = EXCLUDED.node_wall_ms, config_hash = EXCLUDED.config_hash, " \
  "fence = EXCLUDED.fence"

// The claim, and (when $11, ClaimRequest::observe) this replica's observation of its
// outcome in the same statement: the function runs once (a volatile CTE is
// materialized) and the ledger costs no extra round trip. A store-reset or an early
// claim writes nothing, not even the observation.
constexpr const char* kClaimSql =
    "WITH c AS (SELECT * FROM tickd_claim($1, $2::bigint, $3, $4, $5::bigint, $6::bigint, "
    "$7::boolean, $8::boolean, $9, $12::bigint, $13::bigint, $14::bigint)), "
    "o AS (INSERT INTO tickd_observations(job, tick, node, outcome, node_wall_ms, config_hash, "
    "fence) SELECT $1, $2::bigint, $3, c.status, $10::bigint, $9, c.fence FROM c "
    "WHERE $11::boolean AND c.status NOT IN ('store-reset', 'early')" TICKD_OBSERVATION_UPSERT
    ") "
    "SELECT status, fence, holder_node, holder_tick, holder_hash, holder_running, store_ms "
    "FROM c";

constexpr const char* kRenewSql =
    "UPDATE tickd_ticks SET lease_until = now() + $4::bigint * interval '1 millisecond' "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'running' "
    "AND lease_until > now()";

// A retry's new fence: the claim's guard (as renew's) and a fence drawn as a claim
// draws it, in one statement. No row: the claim is not ours any more.
constexpr const char* kRefenceSql =
    "UPDATE tickd_ticks SET fence = ((SELECT e.epoch FROM tickd_epoch e LIMIT 1) << 11) + "
    "nextval('tickd_fence') "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'running' "
    "AND lease_until > now() RETURNING fence";

// The SELECT sees the table as it was before the UPDATE (one snapshot): a record of
// ours that was already done means an earlier Complete went through.
constexpr const char* kCompleteSql =
    "WITH done AS (UPDATE tickd_ticks SET state = 'done', run_outcome = $4, "
    "exit_code = $5::int, duration_ms = $6::bigint, lease_until = now() "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'running' RETURNING 1) "
    "SELECT EXISTS (SELECT 1 FROM done) OR EXISTS (SELECT 1 FROM tickd_ticks "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'done')";

// kCompleteSql for a run that printed: its output ($7) is stored only when the
// owner-checked update happened, in the same statement, and the job's outputs older
// than its $8 newest go. Every CTE sees the snapshot from before the statement, so
// the newest are counted among the other stored outputs plus this one.
constexpr const char* kCompleteOutputSql =
    "WITH done AS (UPDATE tickd_ticks SET state = 'done', run_outcome = $4, "
    "exit_code = $5::int, duration_ms = $6::bigint, lease_until = now() "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'running' RETURNING 1), "
    "put AS (INSERT INTO tickd_outputs(job, tick, output) SELECT $1, $2::bigint, $7 "
    "WHERE EXISTS (SELECT 1 FROM done) ON CONFLICT (job, tick) DO UPDATE SET output = "
    "EXCLUDED.output), "
    "older AS (DELETE FROM tickd_outputs o WHERE o.job = $1 AND EXISTS (SELECT 1 FROM done) "
    "AND o.tick < (SELECT k.t FROM (SELECT tick AS t FROM tickd_outputs WHERE job = $1 "
    "AND tick <> $2::bigint UNION ALL SELECT $2::bigint) k ORDER BY k.t DESC "
    "OFFSET $8::bigint - 1 LIMIT 1)) "
    "SELECT EXISTS (SELECT 1 FROM done) OR EXISTS (SELECT 1 FROM tickd_ticks "
    "WHERE job = $1 AND tick = $2::bigint AND owner = $3 AND state = 'done')";

// The stored outputs of some ticks of a job ($2: a bigint[] literal).
constexpr const char* kOutputsSql =
    "SELECT tick, output FROM tickd_outputs WHERE job = $1 AND tick = ANY($2::bigint[])";

constexpr const char* kRecordSql =
    "INSERT INTO tickd_observations(job, tick, node, outcome, node_wall_ms, config_hash, fence) "
    "VALUES ($1, $2::bigint, $3, $4, $5::bigint, $6, $7::bigint)" TICKD_OBSERVATION_UPSERT;
#undef TICKD_OBSERVATION_UPSERT

// The newest ticks known to the records or the ledger, then one row per observation.
// The newest $2 of each table first (an index walk each: the tick index for all jobs,
// the primary key for one), then of their union: a UNION of the whole tables, sorted
// on every call, grew with the ledger, and the skew watch asks twice a second.
#define TICKD_HISTORY_SQL(FILTER)                                                           \
  "WITH keys AS ((SELECT job, tick FROM tickd_ticks " FILTER                                 \
  " ORDER BY tick DESC, job LIMIT $2::bigint) UNION (SELECT DISTINCT job, tick FROM "       \
  "tickd_observations " FILTER " ORDER BY tick DESC, job LIMIT $2::bigint) "                \
  "ORDER BY tick DESC, job LIMIT $2::bigint) "                                               \
  "SELECT k.job, k.tick, t.node, t.state, t.run_outcome, t.exit_code, t.duration_ms, "      \
  "t.fence, t.config_hash, o.node, o.outcome, o.node_wall_ms, o.config_hash, o.fence "       \
  "FROM keys k LEFT JOIN tickd_ticks t ON t.job = k.job AND t.tick = k.tick "                \
  "LEFT JOIN tickd_observations o ON o.job = k.job AND o.tick = k.tick "                     \
  "ORDER BY k.tick DESC, k.job, o.node"
constexpr const char* kHistoryAllSql = TICKD_HISTORY_SQL("WHERE $1::text = ''");
constexpr const char* kHistoryJobSql = TICKD_HISTORY_SQL("WHERE job = $1");
#undef TICKD_HISTORY_SQL

// Both deletes see one snapshot: the ledger of a record that stays stays too. A record
// stays while it runs with a live lease, and when it is its job's latest, whatever its
// age: the latest record is the job's claim head (docs/design.md §1 rule 12), all the
// store knows of the job, so a job that fires less often than the retention is not
// taken for one whose claims the store lost. (The condition is on the row itself, not
// on a CTE of rows to delete: a record a recover claim revives while Prune runs is
// checked again as it now is.)
#define TICKD_PRUNE_KEEPS_T                                         \
  "((t.state = 'running' AND t.lease_until > now()) OR NOT EXISTS " \
  "(SELECT 1 FROM tickd_ticks l WHERE l.job = t.job AND l.tick > t.tick))"
constexpr const char* kPruneSql =
    "WITH gone AS (DELETE FROM tickd_ticks t WHERE t.tick < $1::bigint "
    "  AND NOT " TICKD_PRUNE_KEEPS_T
    " RETURNING 1), "
    "obs AS (DELETE FROM tickd_observations o WHERE o.tick < $1::bigint AND NOT EXISTS "
    "  (SELECT 1 FROM tickd_ticks t WHERE t.job = o.job AND t.tick = o.tick "
    "   AND " TICKD_PRUNE_KEEPS_T
    ")), "
    // Outputs go by age even where the record stays (a job's latest, its claim head).
    "outs AS (DELETE FROM tickd_outputs WHERE tick < $1::bigint) "
    "SELECT count(*) FROM gone";
#undef TICKD_PRUNE_KEEPS_T

// `tickd locks`: every running record, with what is left of its lease on the
// database's clock.
constexpr const char* kListRunningSql =
    "SELECT job, tick, node, fence, config_hash, "
    "greatest(0, floor(extract(epoch FROM lease_until - now()) * 1000))::bigint, "
    "lease_until > now() FROM tickd_ticks WHERE state = 'running' ORDER BY tick, job";

// Releases a running tick only once the database saw its lease expire; the subselects
// see the row as it was before the UPDATE (one snapshot). The owner is cleared, so the
// old holder's Complete is refused (a done record of its own would be accepted).
constexpr const char* kForceReleaseSql =
    "WITH r AS (UPDATE tickd_ticks SET state = 'done', run_outcome = 'released', owner = '', "
    "lease_until = now() WHERE job = $1 AND tick = $2::bigint AND state = 'running' "
    "AND lease_until <= now() RETURNING 1) "
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM r) THEN 'released' "
    "WHEN EXISTS (SELECT 1 FROM tickd_ticks WHERE job = $1 AND tick = $2::bigint "
    "AND state = 'running') THEN 'alive' ELSE 'not-running' END";

// One statement of a pipeline; parameters in text format, nullopt = NULL.
struct Query {
  const char* sql;
  std::vector<std::optional<std::string>> params;
};

std::int64_t ToInt(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  const char* s = PQgetvalue(r, row, col);
  std::int64_t v = 0;
  std::from_chars(s, s + PQgetlength(r, row, col), v);
  return v;
}

std::string ToText(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

bool ToBool(const PGresult* r, int row, int col) { return ToText(r, row, col) == "t"; }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One answer per request of a batch: the batch's error for every request when the
// pipeline failed as a whole, else parse(result of request i, i).
template <typename T, typename Parse>
std::vector<Result<T>> PerRequest(Result<std::vector<ResultPtr>> results, std::size_t n,
                                  Parse parse) {
  std::vector<Result<T>> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(results ? parse((*results)[i].get(), i)
                          : Result<T>(tl::unexpected(results.error())));
  }
  return out;
}

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(const PostgresOptions& options, bool url_has_password)
      : options_(options),
        url_has_password_(url_has_password),
        context_("postgres " + RedactUrl(options.url)),
        conn_(nullptr, &PQfinish) {}

  // Connects for the factory: its error is the backend's first answer.
  Result<void> Open() {
    std::lock_guard lock(mu_);
    return Connect(steady_clock::now() + options_.op_timeout);
  }

  std::string_view name() const override { return "postgres"; }

  std::vector<std::string> StartupWarnings() override {
    auto results = Run({{"SHOW fsync", {}}, {"SHOW synchronous_commit", {}}});
    if (!results) return {context_ + ": could not check durability: " + results.error().detail};
    std::vector<std::string> values;
    for (const ResultPtr& r : *results) {
      values.push_back(PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1
                           ? ToText(r.get(), 0, 0)
                           : "");
    }
    std::vector<std::string> warnings;
    if (values[0] == "off") {
      warnings.push_back(context_ +
                         ": the server runs with fsync=off: a crash of its machine can lose "
                         "claims and repeat fences (set fsync=on)");
    }
    if (values[1] == "off") {
      warnings.push_back(context_ +
                         ": synchronous_commit is off: a crash of the server can lose the last "
                         "claims, so a tick could run twice and fences could repeat "
                         "(set synchronous_commit=on for tickd's role or database)");
    }
    return warnings;
  }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    auto out = ClaimBatch(std::span<const ClaimRequest>(&req, 1));
    return std::move(out.front());
  }

  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    std::vector<Query> queries;
    queries.reserve(reqs.size());
    for (const ClaimRequest& req : reqs) {
      std::optional<std::string> deadline;
      if (req.starting_deadline) deadline = std::to_string(req.starting_deadline->count());
      queries.push_back({kClaimSql,
                         {req.job, std::to_string(req.tick_unix), req.node, req.owner_token,
                          std::to_string(req.lease.count()), std::move(deadline),
                          req.forbid_overlap ? "true" : "false", req.recover ? "true" : "false",
                          req.config_hash, std::to_string(req.node_wall.time_since_epoch().count()),
                          req.observe ? "true" : "false", std::to_string(req.known_tick),
                          req.max_lead ? std::optional<std::string>(
                                             std::to_string(req.max_lead->count()))
                                       : std::nullopt,
                          std::to_string(req.due_offset.count())}});
    }
    return PerRequest<ClaimOutcome>(RunBatch(std::move(queries), KeysOf(reqs)), reqs.size(),
                                    [&](const PGresult* r, std::size_t i) {
                                      auto out = ParseClaim(r, reqs[i]);
                                      if (out) {
                                        out->observed = reqs[i].observe &&
                                                        out->status != ClaimStatus::kStoreReset &&
                                                        out->status != ClaimStatus::kEarly;
                                      }
                                      return out;
                                    });
  }

  Result<RenewStatus> Renew(const HeldClaim& held) override {
    const std::string where = "renew " + held.job + "@" + std::to_string(held.tick_unix);
    auto r = RunOne({kRenewSql,
                     {held.job, std::to_string(held.tick_unix), held.owner_token,
                      std::to_string(held.lease.count())}},
                    PGRES_COMMAND_OK, where);
    if (!r) return tl::unexpected(r.error());
    return std::string_view(PQcmdTuples(r->get())) == "1" ? RenewStatus::kRenewed
                                                          : RenewStatus::kLost;
  }

  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    const std::string where = "refence " + held.job + "@" + std::to_string(held.tick_unix);
    auto r = RunOne({kRefenceSql, {held.job, std::to_string(held.tick_unix), held.owner_token}},
                    PGRES_TUPLES_OK, where);
    if (!r) return tl::unexpected(r.error());
    if (PQntuples(r->get()) != 1) return RefenceOutcome{};
    return RefenceOutcome{RefenceStatus::kRefenced,
                          static_cast<std::uint64_t>(ToInt(r->get(), 0, 0))};
  }

  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    const CompleteRequest req{held, completion};
    auto out = CompleteBatch(std::span<const CompleteRequest>(&req, 1));
    return std::move(out.front());
  }

  // One round trip and one transaction (one WAL flush) for all of them: RunBatch.
  std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) override {
    std::vector<Query> queries;
    queries.reserve(reqs.size());
    for (const CompleteRequest& req : reqs) {
      std::optional<std::string> exit_code;
      if (req.completion.exit_code) exit_code = std::to_string(*req.completion.exit_code);
      Query q{kCompleteSql,
              {req.held.job, std::to_string(req.held.tick_unix), req.held.owner_token,
               req.completion.outcome, std::move(exit_code),
               std::to_string(req.completion.duration.count())}};
      if (const std::string_view output = OutputToStore(req.completion.output); !output.empty()) {
        q.sql = kCompleteOutputSql;
        q.params.push_back(std::string(output));
        // No count limit: an offset no job reaches.
        const int keep = req.completion.keep_outputs > 0 ? req.completion.keep_outputs : INT32_MAX;
        q.params.push_back(std::to_string(keep));
      }
      queries.push_back(std::move(q));
    }
    std::vector<std::pair<std::string, std::int64_t>> keys;
    for (const CompleteRequest& req : reqs) keys.emplace_back(req.held.job, req.held.tick_unix);
    return PerRequest<CompleteStatus>(
        RunBatch(std::move(queries), keys), reqs.size(),
        [&](const PGresult* r, std::size_t i) -> Result<CompleteStatus> {
          if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
            return MakeError(context_ + ": complete " + reqs[i].held.job + "@" +
                                 std::to_string(reqs[i].held.tick_unix),
                             Trim(PQresultErrorMessage(r)));
          }
          return ToBool(r, 0, 0) ? CompleteStatus::kCompleted : CompleteStatus::kNotOwner;
        });
  }

  Result<void> Record(const Observation& obs) override {
    auto r = RunOne({kRecordSql,
                     {obs.job, std::to_string(obs.tick_unix), obs.node, obs.outcome,
                      std::to_string(obs.node_wall.time_since_epoch().count()), obs.config_hash,
                      std::to_string(obs.fence)}},
                    PGRES_COMMAND_OK, "record " + obs.job);
    if (!r) return tl::unexpected(r.error());
    return {};
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    std::optional<std::string> max_rows;
    if (limit >= 0) max_rows = std::to_string(limit);
    const char* sql = job.empty() ? kHistoryAllSql : kHistoryJobSql;
    auto r = RunOne({sql, {std::string(job), std::move(max_rows)}}, PGRES_TUPLES_OK, "history");
    if (!r) return tl::unexpected(r.error());
    const PGresult* res = r->get();
    std::vector<TickHistory> out;
    for (int row = 0; row < PQntuples(res); ++row) {
      const std::string row_job = ToText(res, row, 0);
      const std::int64_t tick = ToInt(res, row, 1);
      if (out.empty() || out.back().job != row_job || out.back().tick_unix != tick) {
        TickHistory h;
        h.job = row_job;
        h.tick_unix = tick;
        if (!PQgetisnull(res, row, 2)) {
          h.winner = ToText(res, row, 2);
          h.state = ToText(res, row, 3);
          h.run_outcome = ToText(res, row, 4);
          if (!PQgetisnull(res, row, 5)) h.exit_code = static_cast<int>(ToInt(res, row, 5));
          h.duration = milliseconds(ToInt(res, row, 6));
          h.fence = static_cast<std::uint64_t>(ToInt(res, row, 7));
          h.config_hash = ToText(res, row, 8);
        }
        out.push_back(std::move(h));
      }
      if (PQgetisnull(res, row, 9)) continue;  // a record nobody observed
      Observation obs;
      obs.job = row_job;
      obs.tick_unix = tick;
      obs.node = ToText(res, row, 9);
      obs.outcome = ToText(res, row, 10);
      obs.node_wall = WallTime(milliseconds(ToInt(res, row, 11)));
      obs.config_hash = ToText(res, row, 12);
      obs.fence = static_cast<std::uint64_t>(ToInt(res, row, 13));
      out.back().observations.push_back(std::move(obs));
    }
    return out;
  }

  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    std::string array = "{";
    for (const std::int64_t tick : ticks) {
      array += (array.size() > 1 ? "," : "") + std::to_string(tick);
    }
    array += "}";
    auto r = RunOne({kOutputsSql, {std::string(job), std::move(array)}}, PGRES_TUPLES_OK,
                    "outputs of " + std::string(job));
    if (!r) return tl::unexpected(r.error());
    std::map<std::int64_t, std::string> by_tick;
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      by_tick[ToInt(r->get(), row, 0)] = ToText(r->get(), row, 1);
    }
    std::vector<std::string> out;
    for (const std::int64_t tick : ticks) out.push_back(by_tick[tick]);
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    auto r = RunOne({kPruneSql, {std::to_string(cutoff)}}, PGRES_TUPLES_OK, "prune");
    if (!r) return tl::unexpected(r.error());
    return static_cast<int>(ToInt(r->get(), 0, 0));
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    auto r = RunOne({kListRunningSql, {}}, PGRES_TUPLES_OK, "list running");
    if (!r) return tl::unexpected(r.error());
    const PGresult* res = r->get();
    std::vector<RunningClaim> out;
    for (int row = 0; row < PQntuples(res); ++row) {
      RunningClaim c;
      c.job = ToText(res, row, 0);
      c.tick_unix = ToInt(res, row, 1);
      c.node = ToText(res, row, 2);
      c.fence = static_cast<std::uint64_t>(ToInt(res, row, 3));
      c.config_hash = ToText(res, row, 4);
      c.lease_left = milliseconds(ToInt(res, row, 5));
      c.holder_alive = ToBool(res, row, 6);
      out.push_back(std::move(c));
    }
    return out;
  }

  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    const std::string where = "release " + std::string(job) + "@" + std::to_string(tick_unix);
    auto r = RunOne({kForceReleaseSql, {std::string(job), std::to_string(tick_unix)}},
                    PGRES_TUPLES_OK, where);
    if (!r) return tl::unexpected(r.error());
    const std::string answer = ToText(r->get(), 0, 0);
    if (answer == "released") return ForceReleaseStatus::kReleased;
    return answer == "alive" ? ForceReleaseStatus::kHolderAlive : ForceReleaseStatus::kNotRunning;
  }

  Result<void> SetPause(const Pause& pause) override {
    const auto ms = [](WallTime t) { return std::to_string(t.time_since_epoch().count()); };
    auto r = RunOne({"INSERT INTO tickd_pauses(job, since_ms, until_ms, paused_by, reason) "
                     "VALUES ($1, $2::bigint, $3::bigint, $4, $5) "
                     "ON CONFLICT (job) DO UPDATE SET since_ms = EXCLUDED.since_ms, "
                     "until_ms = EXCLUDED.until_ms, paused_by = EXCLUDED.paused_by, "
                     "reason = EXCLUDED.reason",
                     {pause.job, ms(pause.since),
                      pause.until ? std::optional(ms(*pause.until)) : std::nullopt, pause.by,
                      pause.reason}},
                    PGRES_COMMAND_OK, "pause " + pause.job);
    if (!r) return tl::unexpected(r.error());
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    auto r = RunOne({"DELETE FROM tickd_pauses WHERE job = $1", {std::string(job)}},
                    PGRES_COMMAND_OK, "resume " + std::string(job));
    if (!r) return tl::unexpected(r.error());
    return std::string_view(PQcmdTuples(r->get())) != "0";
  }

  Result<std::vector<Pause>> ListPauses() override {
    auto r = RunOne({"SELECT job, since_ms, until_ms, paused_by, reason "
                     "FROM tickd_pauses ORDER BY job",
                     {}},
                    PGRES_TUPLES_OK, "pauses");
    if (!r) return tl::unexpected(r.error());
    const PGresult* res = r->get();
    std::vector<Pause> out;
    for (int row = 0; row < PQntuples(res); ++row) {
      Pause p;
      p.job = ToText(res, row, 0);
      p.since = WallTime(milliseconds(ToInt(res, row, 1)));
      if (!PQgetisnull(res, row, 2)) p.until = WallTime(milliseconds(ToInt(res, row, 2)));
      p.by = ToText(res, row, 3);
      p.reason = ToText(res, row, 4);
      out.push_back(std::move(p));
    }
    return out;
  }

 private:
  Result<ClaimOutcome> ParseClaim(const PGresult* r, const ClaimRequest& req) const {
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 7) {
      return MakeError(context_ + ": claim " + req.job + "@" + std::to_string(req.tick_unix),
                       Trim(PQresultErrorMessage(r)));
    }
    const std::string status = ToText(r, 0, 0);
    ClaimOutcome out;
    out.store_ms = ToInt(r, 0, 6);
    if (status == "early") {
      out.status = ClaimStatus::kEarly;
      return out;
    }
    if (status == "won") {
      out.status = ClaimStatus::kWon;
      out.fence = static_cast<std::uint64_t>(ToInt(r, 0, 1));
      return out;
    }
    if (status == "missed") {
      out.status = ClaimStatus::kMissed;
      return out;
    }
    if (status == "store-reset") {
      out.status = ClaimStatus::kStoreReset;
      out.holder_tick_unix = ToInt(r, 0, 3);  // the job's latest record, 0: none
      return out;
    }
    out.status = status == "busy"         ? ClaimStatus::kBusy
                 : status == "superseded" ? ClaimStatus::kSuperseded
                                          : ClaimStatus::kLost;
    out.holder_node = ToText(r, 0, 2);
    out.holder_tick_unix = ToInt(r, 0, 3);
    out.holder_config_hash = ToText(r, 0, 4);
    out.holder_running = ToBool(r, 0, 5);
    return out;
  }

  static std::vector<std::pair<std::string, std::int64_t>> KeysOf(
      std::span<const ClaimRequest> reqs) {
    std::vector<std::pair<std::string, std::int64_t>> keys;
    for (const ClaimRequest& req : reqs) keys.emplace_back(req.job, req.tick_unix);
    return keys;
  }

  // Runs one query per request in ONE transaction (BEGIN … COMMIT in one pipeline):
  // one round trip and one WAL flush for the batch, where a transaction per request
  // costs a flush each. The queries run sorted by (job, tick), so the batches of two
  // replicas take the per-job locks in the same order and never deadlock. Results
  // come back in the caller's order; when the transaction did not commit, one Error
  // for all of them (nothing of the batch happened: fail closed).
  Result<std::vector<ResultPtr>> RunBatch(
      std::vector<Query> queries, const std::vector<std::pair<std::string, std::int64_t>>& keys) {
    if (queries.size() <= 1) return Run(queries);
    std::vector<std::size_t> order(queries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
    std::vector<Query> txn;
    txn.reserve(queries.size() + 2);
    txn.push_back({"BEGIN", {}});
    for (std::size_t i : order) txn.push_back(std::move(queries[i]));
    txn.push_back({"COMMIT", {}});
    auto results = Run(txn);
    if (!results) return tl::unexpected(results.error());
    const PGresult* commit = results->back().get();
    if (PQresultStatus(commit) != PGRES_COMMAND_OK ||
        std::string_view(PQcmdStatus(const_cast<PGresult*>(commit))) != "COMMIT") {
      std::string detail = "the batch did not commit";
      for (const ResultPtr& r : *results) {
        if (PQresultStatus(r.get()) == PGRES_FATAL_ERROR) {
          detail += ": " + Trim(PQresultErrorMessage(r.get()));
          break;
        }
      }
      return MakeError(context_, detail);
    }
    std::vector<ResultPtr> out;
    out.reserve(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) out.emplace_back(nullptr, &PQclear);
    for (std::size_t k = 0; k < order.size(); ++k) out[order[k]] = std::move((*results)[k + 1]);
    return out;
  }

  // One statement; its result, or an Error (with the server's message) when the
  // result does not have the `want` status.
  Result<ResultPtr> RunOne(Query query, ExecStatusType want, const std::string& what) {
    std::vector<Query> queries;
    queries.push_back(std::move(query));
    auto results = Run(queries);
    if (!results) return tl::unexpected(results.error());
    ResultPtr r = std::move(results->front());
    if (PQresultStatus(r.get()) != want) {
      return MakeError(context_ + ": " + what, Trim(PQresultErrorMessage(r.get())));
    }
    return r;
  }

  // Runs `queries` as one pipeline (one Sync at the end: one implicit transaction)
  // within op_timeout: one result per query (which may be an error result). A reused
  // connection found dead is replaced once (see the top).
  Result<std::vector<ResultPtr>> Run(const std::vector<Query>& queries) {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    const bool reused = conn_ != nullptr;
    if (auto ok = EnsureConnected(deadline); !ok) return tl::unexpected(ok.error());
    auto results = SendLocked(queries, deadline);
    if (!results && reused && steady_clock::now() < deadline) {
      if (auto ok = Connect(deadline); !ok) return tl::unexpected(ok.error());
      results = SendLocked(queries, deadline);
    }
    return results;
  }

  // REQUIRES: mu_ held, connected. Sends every query (and Syncs), then reads every
  // result. An I/O error, a broken connection or the deadline drops the connection.
  Result<std::vector<ResultPtr>> SendLocked(const std::vector<Query>& queries,
                                            steady_clock::time_point deadline) {
    PGconn* c = conn_.get();
    if (PQenterPipelineMode(c) != 1) return Fail(PQerrorMessage(c));
    std::vector<const char*> values;
    for (const Query& q : queries) {
      values.clear();
      for (const auto& p : q.params) values.push_back(p ? p->c_str() : nullptr);
      if (PQsendQueryParams(c, q.sql, static_cast<int>(values.size()), nullptr, values.data(),
                            nullptr, nullptr, 0) != 1) {
        return Fail(PQerrorMessage(c));
      }
    }
    if (PQpipelineSync(c) != 1) return Fail(PQerrorMessage(c));
    std::vector<ResultPtr> out;
    out.reserve(queries.size());
    for (std::size_t i = 0; i < queries.size(); ++i) {
      auto r = Next(deadline);
      if (!r) return tl::unexpected(r.error());
      if (!*r) return Fail("no result from the server");
      // The end of this query's results (a NULL from libpq).
      for (;;) {
        auto end = Next(deadline);
        if (!end) return tl::unexpected(end.error());
        if (!*end) break;
      }
      out.push_back(std::move(*r));
      if (i + 1 == queries.size()) {
        auto sync = Next(deadline);
        if (!sync) return tl::unexpected(sync.error());
        if (!*sync || PQresultStatus(sync->get()) != PGRES_PIPELINE_SYNC) {
          return Fail("pipeline out of step");
        }
      }
    }
    if (PQexitPipelineMode(c) != 1) return Fail(PQerrorMessage(c));
    // A batch that failed leaves its explicit transaction open and aborted (a Sync ends
    // only implicit ones): end it here, so the next call starts clean.
    if (PQtransactionStatus(c) != PQTRANS_IDLE) {
      if (auto rolled_back = SendLocked({{"ROLLBACK", {}}}, deadline); !rolled_back) {
        return tl::unexpected(rolled_back.error());
      }
    }
    backoff_.Succeeded();
    return out;
  }

  // REQUIRES: mu_ held, connected. The next result (nullptr: the end of a query's
  // results), waiting on the socket until the deadline.
  Result<ResultPtr> Next(steady_clock::time_point deadline) {
    PGconn* c = conn_.get();
    for (;;) {
      const int unsent = PQflush(c);
      if (unsent < 0) return Fail(PQerrorMessage(c));
      if (!PQisBusy(c)) {
        ResultPtr r(PQgetResult(c), &PQclear);
        if (PQstatus(c) == CONNECTION_BAD) {
          return Fail(r ? PQresultErrorMessage(r.get()) : PQerrorMessage(c));
        }
        return r;
      }
      if (auto ok = WaitSocket(c, unsent == 1, deadline); !ok) return tl::unexpected(ok.error());
      if (PQconsumeInput(c) != 1) return Fail(PQerrorMessage(c));
    }
  }

  // Waits until the socket is readable (or writable, when `write`) or the deadline.
  Result<void> WaitSocket(PGconn* c, bool write, steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    pollfd pfd{PQsocket(c), static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0};
    const int n = left > milliseconds(0) ? ::poll(&pfd, 1, static_cast<int>(left.count()) + 1) : 0;
    if (n == 0) {
      return Fail("no answer within " + std::to_string(options_.op_timeout.count()) + "ms");
    }
    if (n < 0 && errno != EINTR) return Fail("poll failed");
    return {};
  }

  // Drops the connection after a failure and schedules the next attempt. libpq's
  // messages never contain the password; Scrub() makes sure.
  tl::unexpected<Error> Fail(const std::string& detail) {
    conn_.reset();
    std::string text = Scrub(Trim(detail));
    backoff_.Failed(text);
    return tl::unexpected(Error(context_, std::move(text)));
  }

  std::string Scrub(std::string text) const {
    if (options_.password.empty()) return text;
    for (std::size_t pos; (pos = text.find(options_.password)) != std::string::npos;) {
      text.replace(pos, options_.password.size(), "***");
    }
    return text;
  }

  Result<void> EnsureConnected(steady_clock::time_point deadline) {
    if (conn_) return {};
    if (auto may = backoff_.MayConnect(context_); !may) return may;
    return Connect(deadline);
  }

  // REQUIRES: mu_ held. Connects without blocking past the deadline, then creates or
  // migrates the tables.
  Result<void> Connect(steady_clock::time_point deadline) {
    conn_.reset();
    const std::string timeout = std::to_string(options_.op_timeout.count());
    const std::string session = "-c statement_timeout=" + timeout + " -c lock_timeout=" + timeout;
    const std::string connect_s =
        std::to_string(std::max<std::int64_t>(2, (options_.op_timeout.count() + 999) / 1000));
    // Keywords before "dbname" are overridden by the same keyword inside the URL, so
    // a password in the URL wins over the one from the environment.
    // client_encoding SQL_ASCII: the server converts nothing, so what tickd writes (valid
    // UTF-8) is read back byte for byte on a UTF8, SQL_ASCII or single-byte (LATIN1…)
    // database, whatever PGCLIENTENCODING says. A conversion to LATIN1 would refuse a
    // run's output with a € in it, and fail its complete.
    std::vector<const char*> keys = {"application_name", "connect_timeout", "options",
                                     "client_encoding"};
    std::vector<const char*> values = {"tickd", connect_s.c_str(), session.c_str(), "SQL_ASCII"};
    if (!url_has_password_ && !options_.password.empty()) {
      keys.push_back("password");
      values.push_back(options_.password.c_str());
    }
    if (!options_.username.empty()) {
      keys.push_back("user");
      values.push_back(options_.username.c_str());
    }
    keys.push_back("dbname");
    values.push_back(options_.url.c_str());
    // After the URL, so lock.tls wins over sslmode=… written in it: an operator who
    // asked for verified TLS never gets less because of a URL parameter.
    const TlsFiles& tls = options_.tls;
    if (tls.enabled) {
      keys.push_back("sslmode");
      values.push_back("verify-full");
      for (const auto& [key, file] : {std::pair{"sslrootcert", &tls.ca_file},
                                      std::pair{"sslcert", &tls.cert_file},
                                      std::pair{"sslkey", &tls.key_file}}) {
        if (file->empty()) continue;
        keys.push_back(key);
        values.push_back(file->c_str());
      }
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    conn_.reset(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1));
    if (!conn_) return Fail("cannot allocate a connection");
    if (PQstatus(conn_.get()) == CONNECTION_BAD) {
      return Fail("cannot connect: " + std::string(PQerrorMessage(conn_.get())));
    }
    // libpq prints NOTICEs to stderr by default; the daemon's stderr is its log.
    PQsetNoticeProcessor(
        conn_.get(), [](void*, const char*) {}, nullptr);
    for (PostgresPollingStatusType st = PGRES_POLLING_WRITING;;) {
      if (st == PGRES_POLLING_OK) break;
      if (st == PGRES_POLLING_FAILED) {
        return Fail("cannot connect: " + std::string(PQerrorMessage(conn_.get())));
      }
      if (auto ok = WaitSocket(conn_.get(), st == PGRES_POLLING_WRITING, deadline); !ok) {
        return tl::unexpected(Error(context_, "cannot connect: " + ok.error().detail));
      }
      st = PQconnectPoll(conn_.get());
    }
    if (PQsetnonblocking(conn_.get(), 1) != 0) return Fail(PQerrorMessage(conn_.get()));
    auto migrated = SendLocked({{kMigrate, {}}}, deadline);
    if (!migrated) return tl::unexpected(migrated.error());
    if (PQresultStatus(migrated->front().get()) != PGRES_COMMAND_OK) {
      const std::string detail = "creating the tables (schema version " +
                                 std::to_string(kSchemaVersion) +
                                 "): " + Trim(PQresultErrorMessage(migrated->front().get()));
      conn_.reset();
      backoff_.FailedHard(detail);
      return MakeError(context_, detail);
    }
    return {};
  }

  const PostgresOptions options_;
  const bool url_has_password_;
  const std::string context_;  // "postgres <url with the password masked>"
  std::mutex mu_;
  ConnPtr conn_;
  ReconnectBackoff backoff_;  // when to try connecting again after failures
};

}  // namespace

Result<std::unique_ptr<Backend>> NewPostgresBackend(const PostgresOptions& options) {
  const std::string context = "postgres " + RedactUrl(options.url);
  if (options.url.rfind("postgres://", 0) != 0 && options.url.rfind("postgresql://", 0) != 0) {
    return MakeError(context,
                     "the URL must start with postgres:// "
                     "(postgres://user:password@host:port/db)");
  }
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> parsed(
      PQconninfoParse(options.url.c_str(), &err), &PQconninfoFree);
  if (!parsed) {
    // libpq's parse errors quote the offending part, which may be the password.
    std::string detail = err ? Trim(err) : "cannot parse the URL";
    PQfreemem(err);
    if (RedactUrl(options.url) != options.url) {
      detail = "cannot parse the URL (check its escapes and parameters)";
    }
    return MakeError(context, detail);
  }
  bool url_has_password = false;
  for (const PQconninfoOption* o = parsed.get(); o->keyword != nullptr; ++o) {
    if (std::string_view(o->keyword) == "password" && o->val != nullptr && *o->val != '\0') {
      url_has_password = true;
    }
  }
  auto backend = std::make_unique<PostgresBackend>(options, url_has_password);
  if (auto ok = backend->Open(); !ok) return tl::unexpected(ok.error());
  return backend;
}

}  // namespace tickd::lock
