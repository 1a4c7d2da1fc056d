// The Redis protocol (docs/backends.md, "Redis"). Every decision is one Lua script,
// so it is atomic on the server and judged on the server's clock (`TIME` inside the
// script), never a replica's. All keys of one job carry the hash tag `{job}`, so the
// scripts touch one slot and run unchanged on Redis Cluster (claim and complete are
// given the job's base key "P{job}:" and derive the others from it); on a cluster
// each command goes to the node of its slot and follows MOVED and ASK (SendRouted; a
// script call follows ASK only once its slot has left the migrating node: FollowAsk).
// With prefix P:
//
//   P{job}:t:<T>   tick record (hash): state running|done, owner token, node, fence,
//                  config hash, lease_until, outcome, exit, duration; and the
//                  ledger: field o:<node> = that replica's observation
//                  (outcome/wall/hash/fence). Without a `state` field there is no
//                  record yet, only observations (missed, busy, error).
//                  PX retention: a finished tick is remembered, never claimed again.
//                  The lease is lease_until (ms on the server's clock, `TIME`): a
//                  running record's lease lives while TIME ≤ lease_until. Every
//                  script that judges a lease reads it there (no key per lease).
//   P{job}:run     forbid marker ("token\nT\nnode\nhash"), PX lease, renewed
//                  with the lease: while it lives, another tick of the job is `busy`.
//   P{job}:head    the job's claim head (hash), no TTL (durable only with AOF; see
//                  StartupWarnings): tick = the latest tick of the job ever claimed,
//                  node = who claimed it, fence = the job's last fence; below,
//                  below_node = the latest tick claimed that was not ahead of TIME
//                  while `tick` was (lock/clock_check.h). A fence is
//                  max(last + 1, TIME_ms << 11 + 2 × TIME's µs within the ms)
//                  (lock/backend.h): a server that came
//                  back without its data, or with only its last second lost
//                  (appendfsync everysec), still hands out fences above every earlier
//                  one, unless its clock was set back; a job whose fences an older
//                  tickd counted in P{job}:fence (no longer read) jumps above them.
//   P{job}:ticks   ledger index (sorted set of T); trimmed by Prune, which also sets
//                  its PX retention (a new index has none until the next Prune).
//   P{job}:out:<T> what the finished run of T printed (Completion::output, string),
//                  PX retention; written by complete in the same script.
//   P{job}:outs    index of the stored outputs (sorted set of T), PX retention:
//                  complete keeps its newest keep_outputs and deletes the others'
//                  keys; Prune deletes those of ticks past retention.
//   Pjobs          the set of job names (for History of every job); outside the tag.
//   Ppauses        `tickd pause`: hash, field = job name ('*': every job), value = the
//                  pause as JSON (lock/pause_record.h); no TTL. Read with HGETALL
//                  before each instant's claims; outside the tag.
//
// claim decides in this order, because an existing record is a stronger answer than
// the deadline (a replica that arrives late must hear who won):
//  −1. the request checks the clock (max_lead) and TIME is before T + due_offset −
//      max_lead → early: the replica's clock is ahead of the server's (docs/design.md
//      §1 rule 15). Nothing is written, not even the observation;
//   0. the request knows a later claimed tick than the head holds (known_tick > the
//      head's tick, 0 without a head) → store-reset, naming the head's tick: the
//      server lost its data (docs/design.md §1 rule 12). Nothing is written, not even
//      the observation;
//   1. the record exists: done, or running with a live lease, or recover off →
//      lost (winner, config hash). Running with its lease over and recover on →
//      missed when now > lease_until + starting_deadline, else re-claim below;
//   2. no record and the head names a later tick → superseded (that tick and its
//      node): claims are monotonic per job, decided in the same script. For a checked
//      claim, a head tick further than max_lead ahead of TIME (claimed for the future
//      by an unchecked claim) judges by the head's `below` instead: the latest tick
//      claimed that was not ahead;
//   3. no record and now > T + starting_deadline → missed;
//   4. forbid and the run key names another tick → busy (its node and tick);
//   5. won: fence = max(head's + 1, fence_floor()), move the head (tick only forward;
//      a head ahead keeps its tick and moves `below`; a tick left behind that was not
//      ahead becomes `below`),
//      write the record (owner, node, fence, lease_until = now + lease) and, for
//      forbid, the run key; index T in the ledger.
// A lost answer says whether the record is still running. When the request asks
// (ClaimRequest::observe), every outcome also writes the replica's observation into
// the tick's hash in the same script, as Record would: no ledger round trip per claim.
// renew: only when the record is running, its owner is our token and its lease has
// not passed: store the new lease_until (and PEXPIRE the run key if it is ours).
// refence (a retry's new fence): renew's guard, then fence = max(head's + 1,
// fence_floor()) into the head and the record; the lease is unchanged.
// complete: only when the record's owner is our token: mark it done with the
// completion, delete the run key if it still holds our token (never a bare delete).
//
// Scripts are loaded once per connection (SCRIPT LOAD) and called with EVALSHA; a
// NOSCRIPT answer (SCRIPT FLUSH, a restarted server) is retried with EVAL, which
// also caches the script again. ClaimBatch sends every claim of an instant in one
// pipeline, CompleteBatch every complete it is given: N calls cost one round trip.
// Concurrent Complete calls are coalesced the same way (lock/complete_batcher.h).
// Big pipelines go out in chunks, their replies are read as they come, and the
// biggest are spread over up to eight connections (SendOn, SendSpread).
//
// Failures: every call runs against a deadline of op_timeout (connect included; the
// socket timeouts are set to what is left). Any I/O error or timeout drops the
// connection; the next call reconnects, after a pause that doubles with each failed
// attempt (0, 100 ms … 2 s); calls inside the pause fail at once. An Error from
// Claim means "unknown": the caller does not run (fail closed).
//
// Redis Sentinel (redis-sentinel://): connecting asks the sentinels for the master
// and checks its ROLE (DialMaster); a server that answers as no master any more
// (READONLY, NOREPLICAS …) drops the connection like an I/O error (DropIfNoMaster),
// so the next call asks the sentinels again. ?wait=N: WAIT after the claims of a
// batch; a won claim fewer replicas acknowledged is an Error (not run): a failover
// to a replica that lacks it could let the tick be won again.
#include "lock/redis/redis_backend.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <csignal>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lock/complete_batcher.h"
#include "lock/pause_record.h"
#include "lock/reconnect.h"
#include "lock/registry.h"

namespace tickd::lock {
namespace {

using std::chrono::steady_clock;
using ContextPtr = std::unique_ptr<redisContext, decltype(&redisFree)>;
using ReplyPtr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;
using Command = std::vector<std::string>;
// Sees a pipeline's reply as it is read: (index of its command, the reply).
using ReplyHook = std::function<void(std::size_t, const redisReply*)>;

// The server's clock for the scripts that read it, joined in front of each when its
// text is built (so it is fixed before SCRIPT LOAD and its SHA never changes).
// server_ms(): TIME in ms, read once per script call and only when first asked
// (now_ms stays nil in a call that did not ask); fence_floor(): a fence's floor.
static_assert(kFenceEpochShift == 11,
              "fence_floor() multiplies TIME_ms by 2048 (and adds 2 × the µs in that ms)");
constexpr std::string_view kServerClockLua = R"lua(
local now_ms, now_us = nil, nil
local function server_ms()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    now_us = tonumber(t[2]) % 1000
  end
  return now_ms
end
-- A fence's floor from the clock: TIME_ms << 11, plus the µs within that ms (× 2, so
-- below the next ms's floor). Two servers of one failover (the old master's claim,
-- the new master's re-claim of the same tick) then hand out different fences unless
-- they claim in the same µs, not merely the same ms.
local function fence_floor()
  return server_ms() * 2048 + now_us * 2
end
)lua";

// kServerClockLua followed by a script's body, as one constant.
template <const std::string_view& kBody>
constexpr auto kWithServerClockChars = [] {
  std::array<char, kServerClockLua.size() + kBody.size()> text{};
  std::copy(kBody.begin(), kBody.end(),
            std::copy(kServerClockLua.begin(), kServerClockLua.end(), text.begin()));
  return text;
}();
template <const std::string_view& kBody>
constexpr std::string_view kWithServerClock(kWithServerClockChars<kBody>.data(),
                                            kWithServerClockChars<kBody>.size());

// One call claims one or more ticks. KEYS[i]: claim i's key base "P{job}:" (the keys
// below are derived from it: they carry its hash tag, so they live in its slot).
// ARGV[13(i-1)+1 .. 13i]: claim i's T, node, token, lease_ms, deadline_ms (-1: none),
// forbid, recover, config_hash, retention_ms, node_wall_ms ('' : no observation),
// known_tick (0: none; docs/design.md §1 rule 12), max_lead_ms ('': no clock check;
// rule 15), due_offset_ms.
// Answers, per claim, {status, fence, holder node, holder T, holder hash, holder
// running (1/0), the server's TIME in ms (0 when the call did not read it)}. On Redis
// Cluster every call carries one claim (a script's keys must share one slot); on a plain server a call carries up to kItemsPerCall claims, each
// still touching only its own job's keys: what is shared is the script call's own
// cost (parsing, setup, the AOF's MULTI/EXEC, the reply), ~2 µs of a ~7 µs claim.
// The server's clock is read once per call (a call runs well under a millisecond).
// One short key per claim: with appendfsync always the server fsyncs once per
// event-loop turn, and a turn reads at most 16 KB per connection, so the bytes of a
// claim decide how many claims share one fsync.
// With a node_wall, the replica's observation of the outcome is written as Record
// writes it (same field, same encoding), so the claim needs no second round trip.
// What the server pays for is keys created and commands called, so a claim does as
// few as it can: a loser reads the head (when it knows a claimed tick), the record
// and adds its observation (3 calls, one write); a winner writes one new key per tick, the record
// (the lease is the record's lease_until on the server's clock, not a key of its own: a key created
// and deleted per tick cost more than the rest of the claim), plus the fence and the ledger index.
// The index's lifetime is renewed by Prune (the daemon prunes at start and hourly),
// not by claims: every redis.call costs the server ~1 µs, a tenth of a won claim.
constexpr std::string_view kClaimBodyLua = R"lua(
local function claim(base, o)
  local tick, node, hash, obs_wall = ARGV[o + 1], ARGV[o + 2], ARGV[o + 8], ARGV[o + 10]
  local head_key, known = base .. 'head', tonumber(ARGV[o + 11])
  local lead = ARGV[o + 12] ~= '' and tonumber(ARGV[o + 12]) or nil
  -- The replica's clock is ahead of the server's: the tick is not due yet. Nothing is
  -- written (the replica records its observation).
  if lead and server_ms() < tonumber(tick) * 1000 + tonumber(ARGV[o + 13]) - lead then
    return {'early', 0, '', 0, '', 0}
  end
  local head = nil
  -- The replica saw a later claim than the head: the server lost its data. Nothing is
  -- written, not even the observation. (known 0 knows nothing: the head is read below.)
  if known > 0 then
    head = redis.call('HMGET', head_key, 'tick', 'node', 'fence', 'below', 'below_node')
    local head_tick = head[1] and tonumber(head[1]) or 0
    if known > head_tick then return {'store-reset', 0, head[2] or '', head_tick, '', 0} end
  end
  local record = base .. 't:' .. tick
  local rec = redis.call('HMGET', record, 'state', 'node', 'hash', 'lease_until')
  -- A record answers lost, unless it is running, the job recovers and its lease is over.
  if rec[1] and (rec[1] ~= 'running' or ARGV[o + 7] ~= '1' or server_ms() <= tonumber(rec[4])) then
    if obs_wall ~= '' then
      redis.call('HSET', record, 'o:' .. node, 'lost\31' .. obs_wall .. '\31' .. hash .. '\31' .. '0')
    end
    return {'lost', 0, rec[2], tonumber(tick), rec[3], rec[1] == 'running' and 1 or 0}
  end
  local lease, deadline = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local run_key = base .. 'run'
  head = head or redis.call('HMGET', head_key, 'tick', 'node', 'fence', 'below', 'below_node')
  -- A head further than lead ahead of the server's clock was claimed for the future (a
  -- wrong clock, an unchecked claim): a checked claim is judged against `below`, the
  -- latest tick claimed that was not ahead, instead.
  local ahead = lead and head[1] and tonumber(head[1]) * 1000 - lead > server_ms()
  local judged, judged_node = head[1], head[2]
  if ahead then judged, judged_node = head[4], head[5] end
  -- superseded, missed or busy: nobody's record is written, only this replica's observation.
  local alone, reply = nil, nil
  if not rec[1] and judged and tonumber(judged) > tonumber(tick) then
    alone, reply = 'superseded', {'superseded', 0, judged_node or '', tonumber(judged), '', 0}
  elseif deadline >= 0 and
      server_ms() > (rec[1] and tonumber(rec[4]) or tonumber(tick) * 1000) + deadline then
    alone, reply = 'missed', {'missed', 0, '', 0, '', 0}
  elseif ARGV[o + 6] == '1' then
    local run = redis.call('GET', run_key)
    if run then
      local _, run_tick, run_node, run_hash = string.match(run, '^(.-)\n(.-)\n(.-)\n(.*)$')
      if run_tick ~= tick then
        alone, reply = 'busy', {'busy', 0, run_node, tonumber(run_tick), run_hash, 1}
      end
    end
  end
  if alone then
    if obs_wall == '' then return reply end
    redis.call('HSET', record, 'o:' .. node, alone .. '\31' .. obs_wall .. '\31' .. hash .. '\31' .. '0')
    if redis.call('PTTL', record) < 0 then redis.call('PEXPIRE', record, ARGV[o + 9]) end
  else
    -- Fences are formatted here: Lua's own tostring keeps 14 digits only.
    local fence = math.max(head[3] and tonumber(head[3]) + 1 or 0, fence_floor())
    local fence_s = string.format('%.0f', fence)
    if ahead then
      -- The head's tick stays (store-reset compares with it); below moves forward.
      if not head[4] or tonumber(head[4]) < tonumber(tick) then
        redis.call('HSET', head_key, 'fence', fence_s, 'below', tick, 'below_node', node)
      else
        redis.call('HSET', head_key, 'fence', fence_s)
      end
    elseif head[1] and tonumber(head[1]) >= tonumber(tick) then
      redis.call('HSET', head_key, 'fence', fence_s)
    elseif head[1] and tonumber(head[1]) * 1000 - (lead or 0) <= server_ms() then
      redis.call('HSET', head_key, 'fence', fence_s, 'tick', tick, 'node', node,
                 'below', head[1], 'below_node', head[2] or '')
    else
      redis.call('HSET', head_key, 'fence', fence_s, 'tick', tick, 'node', node)
    end
    -- Every field of a running record is written (a re-claim overwrites the dead
    -- holder's); the observations of the tick stay.
    local fields = {'state', 'running', 'owner', ARGV[o + 3], 'node', node, 'fence', fence_s,
                    'hash', hash, 'lease_until', server_ms() + lease}
    if obs_wall ~= '' then
      fields[13] = 'o:' .. node
      fields[14] = 'won\31' .. obs_wall .. '\31' .. hash .. '\31' .. fence_s
    end
    redis.call('HSET', record, unpack(fields))
    redis.call('PEXPIRE', record, ARGV[o + 9])
    if ARGV[o + 6] == '1' then
      redis.call('SET', run_key, ARGV[o + 3] .. '\n' .. tick .. '\n' .. node .. '\n' .. hash,
                 'PX', lease)
    end
    reply = {'won', fence, '', 0, '', 1}
  end
  redis.call('ZADD', base .. 'ticks', tick, tick)
  return reply
end
local out = {}
for i = 1, #KEYS do
  out[i] = claim(KEYS[i], (i - 1) * 13)
  out[i][7] = now_ms or 0
end
return out
)lua";
constexpr std::string_view kClaimLua = kWithServerClock<kClaimBodyLua>;

// The run key is "token\nT\nnode\nhash"; it is ours when it starts with "token\n".
// KEYS: record, run. ARGV: token, lease_ms. 1 renewed, 0 lost: the record is not
// ours, not running, or its lease_until has passed on the server's clock.
constexpr std::string_view kRenewBodyLua = R"lua(
local rec = redis.call('HMGET', KEYS[1], 'owner', 'state', 'lease_until')
if rec[1] ~= ARGV[1] or rec[2] ~= 'running' then return 0 end
local now = server_ms()
if now > tonumber(rec[3]) then return 0 end
redis.call('HSET', KEYS[1], 'lease_until', now + tonumber(ARGV[2]))
local run = redis.call('GET', KEYS[2])
if run and string.sub(run, 1, #ARGV[1] + 1) == ARGV[1] .. '\n' then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
)lua";
constexpr std::string_view kRenewLua = kWithServerClock<kRenewBodyLua>;

// KEYS[i]: complete i's key base "P{job}:" (as for claim; several per call on a plain
// server, one on a cluster). ARGV[8(i-1)+1 .. 8i]: its T, token, outcome, exit ('' none),
// duration_ms, output ('' none), keep_outputs (0: no count limit), retention_ms (0: no
// TTL). Answers, per complete, 1 completed (or already done by us), 0 not the owner.
// One write for a job without forbid that printed nothing: the record (lease_until is
// left as it was: it means nothing once done).
constexpr std::string_view kCompleteLua = R"lua(
local function keep_output(base, tick, output, keep, retention)
  if output == '' then return end
  local key, index = base .. 'out:' .. tick, base .. 'outs'
  redis.call('SET', key, output)
  redis.call('ZADD', index, tick, tick)
  if retention > 0 then
    redis.call('PEXPIRE', key, retention)
    redis.call('PEXPIRE', index, retention)
  end
  if keep > 0 then
    for _, old in ipairs(redis.call('ZREVRANGE', index, keep, -1)) do
      redis.call('DEL', base .. 'out:' .. old)
      redis.call('ZREM', index, old)
    end
  end
end
local function complete(base, o)
  local record, token = base .. 't:' .. ARGV[o + 1], ARGV[o + 2]
  local rec = redis.call('HMGET', record, 'owner', 'state')
  if rec[1] ~= token then return 0 end
  if rec[2] == 'done' then return 1 end
  redis.call('HSET', record, 'state', 'done', 'outcome', ARGV[o + 3], 'exit', ARGV[o + 4],
             'duration', ARGV[o + 5])
  local run_key = base .. 'run'
  local run = redis.call('GET', run_key)
  if run and string.sub(run, 1, #token + 1) == token .. '\n' then redis.call('DEL', run_key) end
  keep_output(base, ARGV[o + 1], ARGV[o + 6], tonumber(ARGV[o + 7]), tonumber(ARGV[o + 8]))
  return 1
end
local out = {}
for i = 1, #KEYS do out[i] = complete(KEYS[i], (i - 1) * 8) end
return out
)lua";

// KEYS: ticks. ARGV: cutoff T (exclusive), the job's key base "P{job}:", retention_ms.
// Removes records and observations of older ticks unless running with a live lease;
// returns how many records went. (The keys it derives share the job's hash tag.)
// Claims neither trim the index nor renew its lifetime (that would cost every
// claim): this does both, so an index lives for retention after the last Prune.
constexpr std::string_view kPruneBodyLua = R"lua(
local now = server_ms()
local removed = 0
for _, tick in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])) do
  local rec = ARGV[2] .. 't:' .. tick
  local r = redis.call('HMGET', rec, 'state', 'lease_until')
  if not (r[1] == 'running' and now <= tonumber(r[2])) then
    if r[1] then removed = removed + 1 end
    redis.call('DEL', rec)
    redis.call('ZREM', KEYS[1], tick)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local outs = ARGV[2] .. 'outs'
for _, tick in ipairs(redis.call('ZRANGEBYSCORE', outs, '-inf', '(' .. ARGV[1])) do
  redis.call('DEL', ARGV[2] .. 'out:' .. tick)
  redis.call('ZREM', outs, tick)
end
return removed
)lua";
constexpr std::string_view kPruneLua = kWithServerClock<kPruneBodyLua>;

// `tickd locks`. KEYS: the job's ticks index. ARGV: the job's key base. Every record
// of the job still running: {T, node, fence, hash, ms of lease left (-2: gone)}; the
// lease is the record's lease_until on the server's clock, alive while TIME ≤ it.
// Operator commands, rarely run: sent with EVAL, not loaded with the claim scripts.
constexpr std::string_view kListRunningBodyLua = R"lua(
local now = server_ms()
local out = {}
for _, t in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local rec = redis.call('HMGET', ARGV[1] .. 't:' .. t, 'state', 'node', 'fence', 'hash',
                         'lease_until')
  if rec[1] == 'running' then
    local left = tonumber(rec[5]) - now
    out[#out + 1] = {t, rec[2], rec[3], rec[4], left >= 0 and math.max(left, 1) or -2}
  end
end
return out
)lua";
constexpr std::string_view kListRunningLua = kWithServerClock<kListRunningBodyLua>;

// KEYS: the job's key base. ARGV: T. 'released', 'alive' or 'not-running'. One script:
// no renew or complete runs between the check and the change. A released record has
// no owner, so the old holder's Renew (owner-checked) and Complete are refused.
constexpr std::string_view kForceReleaseBodyLua = R"lua(
local record = KEYS[1] .. 't:' .. ARGV[1]
local rec = redis.call('HMGET', record, 'state', 'owner', 'lease_until')
if rec[1] ~= 'running' then return 'not-running' end
local now = server_ms()
if now <= tonumber(rec[3]) then return 'alive' end
redis.call('HSET', record, 'state', 'done', 'owner', '', 'outcome', 'released', 'exit', '',
           'duration', 0, 'lease_until', now)
local run = redis.call('GET', KEYS[1] .. 'run')
if run and string.sub(run, 1, #rec[2] + 1) == rec[2] .. '\n' then
  redis.call('DEL', KEYS[1] .. 'run')
end
return 'released'
)lua";
constexpr std::string_view kForceReleaseLua = kWithServerClock<kForceReleaseBodyLua>;

// A retry's new fence. KEYS: the job's key base. ARGV: T, token. The claim's guard (as
// renew's: ours, running, lease not passed on the server's clock), then a fence drawn
// as a claim draws it, max(head's + 1, fence_floor()), written to the head and the
// record. Answers the new fence (a string: Lua keeps 14 digits), or 0 when not ours.
// Sent with EVAL (a retry is rare; the claim scripts stay as they are).
constexpr std::string_view kRefenceBodyLua = R"lua(
local record = KEYS[1] .. 't:' .. ARGV[1]
local rec = redis.call('HMGET', record, 'owner', 'state', 'lease_until')
if rec[1] ~= ARGV[2] or rec[2] ~= 'running' then return 0 end
local now = server_ms()
if now > tonumber(rec[3]) then return 0 end
local head_key = KEYS[1] .. 'head'
local last = redis.call('HGET', head_key, 'fence')
local fence_s = string.format('%.0f', math.max(last and tonumber(last) + 1 or 0, fence_floor()))
redis.call('HSET', head_key, 'fence', fence_s)
redis.call('HSET', record, 'fence', fence_s)
return fence_s
)lua";
constexpr std::string_view kRefenceLua = kWithServerClock<kRefenceBodyLua>;

enum class Script { kClaim, kRenew, kComplete, kPrune };
constexpr std::string_view kScripts[] = {kClaimLua, kRenewLua, kCompleteLua, kPruneLua};

struct HostPort {
  std::string host = "127.0.0.1";
  int port = 6379;
};

struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;
  std::string password;
  std::string prefix = "tickd:";
  // redis-sentinel://: the sentinels to ask, and the name of the master they watch;
  // host:port above is then the master they named last.
  std::vector<HostPort> sentinels;
  std::string master_name;
  // ?wait=N: a won claim counts only once N replicas acknowledged it (WAIT).
  int wait_replicas = 0;
};

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    int value = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool ParseInt(std::string_view text, int& out) {
  return !text.empty() && std::from_chars(text.data(), text.data() + text.size(), out).ptr ==
                              text.data() + text.size();
}

// host[:port], [v6]:port, :port or "" into `out` (which holds the defaults).
Result<void> ParseHostPort(std::string_view text, HostPort& out) {
  std::string_view port;
  if (!text.empty() && text.front() == '[') {  // [::1]:6379
    const auto close = text.find(']');
    if (close == std::string_view::npos) return MakeError("", "unclosed '[' in the host");
    out.host = std::string(text.substr(1, close - 1));
    text.remove_prefix(close + 1);
    if (!text.empty() && text.front() == ':') port = text.substr(1);
  } else {
    const auto colon = text.rfind(':');
    if (!text.substr(0, colon).empty()) out.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  if (!port.empty() && (!ParseInt(port, out.port) || out.port <= 0 || out.port > 65535)) {
    return MakeError("", "bad port '" + std::string(port) + "'");
  }
  return {};
}

// redis://[user[:password]@]host[:port][/db][?prefix=P&wait=N]
// redis-sentinel://[user[:password]@]host[:port][,host[:port]…]/master[/db][?…]
// (sentinel port 26379 by default; user and password are the master's and also sent
// to a sentinel that asks for them).
Result<Endpoint> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  constexpr std::string_view kSentinelScheme = "redis-sentinel://";
  Endpoint ep;
  if (url.empty()) return ep;
  const bool sentinel = url.starts_with(kSentinelScheme);
  if (!sentinel && !url.starts_with(kScheme)) {
    return MakeError("", "the URL must start with redis:// (redis://[user:password@]host:port/db) "
                         "or redis-sentinel:// (redis-sentinel://host:port,host:port/master/db)");
  }
  std::string_view rest(url);
  rest.remove_prefix(sentinel ? kSentinelScheme.size() : kScheme.size());
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    ep.user = PercentDecode(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) ep.password = PercentDecode(userinfo.substr(colon + 1));
  }
  if (sentinel) {
    while (true) {
      const auto comma = rest.find(',');
      HostPort hp{"127.0.0.1", 26379};
      if (auto ok = ParseHostPort(rest.substr(0, comma), hp); !ok) {
        return tl::unexpected(ok.error());
      }
      ep.sentinels.push_back(std::move(hp));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    const auto slash = path.find('/');
    ep.master_name = PercentDecode(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (ep.master_name.empty()) {
      return MakeError("", "names no master (redis-sentinel://host:port[,host:port…]/master[/db])");
    }
  } else {
    HostPort hp;
    if (auto ok = ParseHostPort(rest, hp); !ok) return tl::unexpected(ok.error());
    ep.host = std::move(hp.host);
    ep.port = hp.port;
  }
  if (!path.empty() && (!ParseInt(path, ep.db) || ep.db < 0)) {
    return MakeError("", "bad database index '" + std::string(path) + "' (want /0, /1, …)");
  }
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.rfind("prefix=", 0) == 0) {
      ep.prefix = PercentDecode(param.substr(7));
    } else if (param.rfind("wait=", 0) == 0) {
      if (!ParseInt(param.substr(5), ep.wait_replicas) || ep.wait_replicas < 0) {
        return MakeError("", "bad wait '" + std::string(param.substr(5)) +
                                 "' (want the number of replicas a claim must reach, e.g. wait=1)");
      }
    } else if (!param.empty()) {
      const std::string key(param.substr(0, param.find('=')));
      return MakeError("", "unknown URL parameter '" + key + "' (known: prefix, wait)");
    }
  }
  return ep;
}

timeval ToTimeval(milliseconds d) {
  d = std::max(d, milliseconds(1));
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

std::string_view Str(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS &&
                       r->type != REDIS_REPLY_ERROR)) {
    return {};
  }
  return std::string_view(r->str, r->len);
}

std::int64_t Int(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  std::int64_t v = 0;
  const std::string_view s = Str(r);
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Blocks SIGPIPE in this thread while it lives and discards one raised meanwhile:
// hiredis writes with write(2), so a write to a connection the server closed would
// otherwise kill a process that does not ignore SIGPIPE; this way it is an EPIPE,
// returned as an Error like any other I/O failure.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~ScopedSigpipeBlock() {
    if (!blocked_) return;
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
  bool blocked_ = false;
};

// Redis Cluster's hash slot of a key: CRC16 (XMODEM) of its hash tag (what stands
// between the first '{' and the next '}', when that is not empty), else of the key.
int KeySlot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  std::uint16_t crc = 0;
  for (const unsigned char c : key) {
    crc = static_cast<std::uint16_t>(crc ^ (c << 8));
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc & 16383;
}

// The key a command goes by on a cluster: a script call's first key, a key
// command's first argument; none for what any node answers (CONFIG, INFO, SCRIPT).
std::optional<std::string_view> RoutingKey(const Command& cmd) {
  const std::string& name = cmd.front();
  if (name == "EVAL" || name == "EVALSHA") {
    if (cmd.size() > 3 && cmd[2] != "0") return cmd[3];
    return std::nullopt;
  }
  if (name == "CONFIG" || name == "INFO" || name == "SCRIPT" || name == "CLUSTER")
    return std::nullopt;
  if (cmd.size() > 1) return cmd[1];
  return std::nullopt;
}

// `n` empty places for replies that arrive out of order (several connections).
std::vector<ReplyPtr> NoReplies(std::size_t n) {
  std::vector<ReplyPtr> replies;
  replies.reserve(n);
  for (std::size_t i = 0; i < n; ++i) replies.emplace_back(nullptr, &freeReplyObject);
  return replies;
}

// "MOVED <slot> <host>:<port>": the slot is served elsewhere now.
bool IsMoved(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ERROR && Str(r).starts_with("MOVED ");
}

// "ASK <slot> <host>:<port>": the slot is being migrated there, and this node does not
// hold the command's keys: ask that node, this once.
bool IsAsk(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ERROR && Str(r).starts_with("ASK ");
}

// A redirection's slot and "host:port" ("MOVED 3999 127.0.0.1:6381", "ASK …").
std::pair<std::string, std::string> RedirectionTarget(const redisReply* r) {
  const std::string_view text = Str(r);
  const auto first = text.find(' ');
  const auto second = text.find(' ', first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos) return {};
  return {std::string(text.substr(first + 1, second - first - 1)),
          std::string(text.substr(second + 1))};
}

// A script call, built once as "EVALSHA <sha> numkeys keys... args..."; the sha (or,
// after NOSCRIPT, EVAL and the body) is filled in when it is sent.
struct ScriptCall {
  ScriptCall(Script s, std::initializer_list<std::string> keys,
             std::initializer_list<std::string> args)
      : script(s) {
    cmd.reserve(3 + keys.size() + args.size());
    cmd.push_back("EVALSHA");
    cmd.emplace_back();
    cmd.push_back(std::to_string(keys.size()));
    cmd.insert(cmd.end(), keys);
    cmd.insert(cmd.end(), args);
  }
  Script script;
  Command cmd;
};

class RedisBackend final : public Backend {
 public:
  RedisBackend(const RedisOptions& options, Endpoint endpoint)
      : options_(options),
        endpoint_(std::move(endpoint)),
        context_("redis " +
                 RedactUrl(options.url.empty() ? "redis://127.0.0.1:6379/0" : options.url)),
        conn_(nullptr, &redisFree) {
    for (std::size_t i = 1; i < kLanes; ++i) lanes_.emplace_back(nullptr, &redisFree);
    if (endpoint_.user.empty()) endpoint_.user = options.username;
    if (endpoint_.password.empty()) endpoint_.password = options.password;
  }

  // Connects for the factory: its error is the backend's first answer.
  Result<void> Open() {
    std::lock_guard lock(mu_);
    return Connect(steady_clock::now() + options_.op_timeout);
  }

  std::string_view name() const override { return "redis"; }

  std::vector<std::string> StartupWarnings() override {
    auto replies = Pipeline({{"CONFIG", "GET", "appendonly"}, {"CONFIG", "GET", "appendfsync"}});
    if (!replies) {
      return {context_ + ": could not check durability: " + replies.error().detail};
    }
    std::vector<std::string> values;
    for (const ReplyPtr& r : *replies) {
      if (r->type == REDIS_REPLY_ERROR) {
        return {context_ +
                ": could not check durability (CONFIG GET refused: " + std::string(Str(r.get())) +
                "); without appendonly yes + appendfsync always a restart of the server "
                "can forget claims, so a tick could run twice"};
      }
      values.emplace_back(r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? Str(r->element[1])
                                                                           : std::string_view());
    }
    std::vector<std::string> warnings;
    if (!endpoint_.sentinels.empty() && endpoint_.wait_replicas == 0) {
      warnings.push_back(context_ +
                         ": replication is asynchronous and no ?wait is set: a failover can "
                         "forget the last claims, so a tick could run twice (see ?wait=N)");
    }
    if (values[0] != "yes") {
      warnings.push_back(context_ +
                         ": appendonly is off: a restart of the server loses tick records, so "
                         "a tick could run twice (fences still grow: they follow the server's "
                         "clock) (set appendonly yes and appendfsync always)");
    } else if (values[1] != "always") {
      warnings.push_back(context_ + ": appendfsync is " + values[1] +
                         ", not always: a crash of the server can lose the last claims, so "
                         "a tick could run twice after a restart");
    }
    return warnings;
  }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    auto out = ClaimBatch(std::span<const ClaimRequest>(&req, 1));
    return std::move(out.front());
  }

  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    std::vector<Result<ClaimOutcome>> out(reqs.size(), ClaimOutcome{});
    ClaimBatchAsAnswered(reqs,
                         [&](std::size_t i, Result<ClaimOutcome> r) { out[i] = std::move(r); });
    return out;
  }

  // The answers of one script call are handed over as soon as its reply is read (on
  // the thread reading that connection), so with a 10,000-claim batch the first jobs
  // can start after the first call, not after the last. A call the server did not
  // know (NOSCRIPT) is answered after its EVAL; what has no answer when a connection
  // fails is an error (fail closed), while answers already handed over stand: the
  // server decided them.
  void ClaimBatchAsAnswered(std::span<const ClaimRequest> reqs,
                            const ClaimAnswer& on_answer) override {
    const std::size_t per_call = PerCall();
    const std::string retention = std::to_string(options_.retention.count());
    auto calls = GroupedCalls(Script::kClaim, reqs.size(), per_call, [&](std::size_t i) {
      return Base(reqs[i].job);
    }, [&](std::size_t i, Command& cmd) {
      const ClaimRequest& req = reqs[i];
      cmd.insert(cmd.end(),
                 {std::to_string(req.tick_unix), req.node, req.owner_token,
                  std::to_string(req.lease.count()),
                  req.starting_deadline ? std::to_string(req.starting_deadline->count()) : "-1",
                  req.forbid_overlap ? "1" : "0", req.recover ? "1" : "0", req.config_hash,
                  retention,
                  req.observe ? std::to_string(req.node_wall.time_since_epoch().count()) : "",
                  std::to_string(req.known_tick),
                  req.max_lead ? std::to_string(req.max_lead->count()) : "",
                  std::to_string(req.due_offset.count())});
    });
    std::vector<std::string_view> jobs;
    jobs.reserve(reqs.size());
    for (const ClaimRequest& req : reqs) jobs.push_back(req.job);
    const std::size_t n_calls = calls.size();
    std::mutex answer_mu;  // one on_answer at a time; stripes read in parallel
    std::vector<char> answered(reqs.size(), 0);
    const ReplyHook answer_call = [&](std::size_t k, const redisReply* reply) {
      if (k >= n_calls || Str(reply).starts_with("NOSCRIPT")) return;  // the SADD; an EVAL follows
      std::lock_guard lock(answer_mu);
      for (std::size_t i = k * per_call; i < std::min(reqs.size(), (k + 1) * per_call); ++i) {
        if (answered[i]) continue;
        answered[i] = 1;
        Result<ClaimOutcome> r = ParseClaim(ItemOfCall(reply, i, per_call, reqs.size()));
        if (r) {
          r->observed = reqs[i].observe && r->status != ClaimStatus::kStoreReset &&
                        r->status != ClaimStatus::kEarly;
        }
        on_answer(i, std::move(r));
      }
    };
    // ?wait=N: no answer is handed over before WAIT said how many replicas hold them.
    const int wait = endpoint_.wait_replicas;
    int acked = 0;
    auto replies = RunScripts(calls, jobs, per_call, wait > 0 ? nullptr : &answer_call,
                              wait > 0 ? &acked : nullptr);
    if (replies && acked < wait) {
      // A won claim only the master holds is not run: a failover now could forget it
      // and let another replica win the tick again. Lost, busy… stand (nothing to run).
      const Error unsure(context_, "claim won, but only " + std::to_string(acked) + " of " +
                                       std::to_string(wait) +
                                       " replicas acknowledged it in time (?wait): not run");
      for (std::size_t k = 0; k < replies->size(); ++k) {
        const redisReply* reply = (*replies)[k].get();
        for (std::size_t i = k * per_call; i < std::min(reqs.size(), (k + 1) * per_call); ++i) {
          const redisReply* item = ItemOfCall(reply, i, per_call, reqs.size());
          if (item->type == REDIS_REPLY_ARRAY && item->elements > 0 &&
              Str(item->element[0]) == "won") {
            answered[i] = 1;
            on_answer(i, tl::unexpected(unsure));
          }
        }
      }
    }
    if (replies) {
      for (std::size_t k = 0; k < replies->size(); ++k) answer_call(k, (*replies)[k].get());
    }
    const Error unknown = replies ? Error(context_, "no answer for this claim") : replies.error();
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (!answered[i]) on_answer(i, tl::unexpected(unknown));
    }
  }

  Result<RenewStatus> Renew(const HeldClaim& held) override {
    const std::string base = Base(held.job);
    const std::string tick = std::to_string(held.tick_unix);
    auto reply =
        RunScript(ScriptCall(Script::kRenew, {base + "t:" + tick, base + "run"},
                             {held.owner_token, std::to_string(held.lease.count())}));
    if (!reply) return tl::unexpected(reply.error());
    return Int(reply->get()) == 1 ? RenewStatus::kRenewed : RenewStatus::kLost;
  }

  // ?wait=N as for a won claim: a new fence only the master holds is an Error (the
  // attempt does not start), since a failover could forget it and hand it out again.
  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    const std::string where = context_ + ": refence " + held.job + "@" +
                              std::to_string(held.tick_unix);
    std::vector<Command> cmds = {{"EVAL", std::string(kRefenceLua), "1", Base(held.job),
                                  std::to_string(held.tick_unix), held.owner_token}};
    const int wait = endpoint_.wait_replicas;
    if (wait > 0) {
      cmds.push_back({"WAIT", std::to_string(wait),
                      std::to_string(std::max<std::int64_t>(1, options_.op_timeout.count() / 2))});
    }
    auto replies = Pipeline(cmds);
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type == REDIS_REPLY_ERROR) return MakeError(where, std::string(Str(r)));
    if (r->type == REDIS_REPLY_INTEGER) return RefenceOutcome{};
    std::uint64_t fence = 0;
    const std::string_view text = Str(r);
    if (std::from_chars(text.data(), text.data() + text.size(), fence).ec != std::errc() ||
        fence == 0) {
      return MakeError(where, "unexpected answer '" + std::string(text) + "'");
    }
    if (wait > 0 && Int(replies->back().get()) < wait) {
      return MakeError(where, "new fence held by only " +
                                  std::to_string(Int(replies->back().get())) + " of " +
                                  std::to_string(wait) + " replicas in time (?wait)");
    }
    return RefenceOutcome{RefenceStatus::kRefenced, fence};
  }

  // Runs that end together complete together (group commit): concurrent calls share
  // one CompleteBatch pipeline, see lock/complete_batcher.h. Each answer is the one its
  // own script gave: coalescing changes round trips, not results.
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    return completer_.Complete(held, completion);
  }

  // Every complete in one pipeline: N runs that ended together cost one round trip.
  std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) override {
    const std::size_t per_call = PerCall();
    auto calls = GroupedCalls(Script::kComplete, reqs.size(), per_call, [&](std::size_t i) {
      return Base(reqs[i].held.job);
    }, [&](std::size_t i, Command& cmd) {
      const auto& [held, completion] = reqs[i];
      cmd.insert(cmd.end(),
                 {std::to_string(held.tick_unix), held.owner_token, completion.outcome,
                  completion.exit_code ? std::to_string(*completion.exit_code) : "",
                  std::to_string(completion.duration.count()),
                  std::string(OutputToStore(completion.output)),
                  std::to_string(std::max(0, completion.keep_outputs)),
                  std::to_string(std::max<std::int64_t>(0, options_.retention.count()))});
    });
    auto replies = RunScripts(calls, {}, per_call);
    std::vector<Result<CompleteStatus>> out;
    out.reserve(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (!replies) {
        out.emplace_back(tl::unexpect, replies.error());
        continue;
      }
      const redisReply* r = ItemReply(*replies, i, per_call, reqs.size());
      if (r->type == REDIS_REPLY_ERROR) {
        out.push_back(MakeError(context_ + ": complete", std::string(Str(r))));
      } else {
        out.push_back(Int(r) == 1 ? CompleteStatus::kCompleted : CompleteStatus::kNotOwner);
      }
    }
    return out;
  }

  Result<void> Record(const Observation& obs) override {
    const std::string base = Base(obs.job);
    const std::string tick = std::to_string(obs.tick_unix);
    const std::string retention = std::to_string(options_.retention.count());
    std::vector<Command> cmds = {
        {"HSET", base + "t:" + tick, "o:" + obs.node, EncodeObservation(obs)},
        {"PEXPIRE", base + "t:" + tick, retention},
        {"ZADD", base + "ticks", tick, tick},
        {"PEXPIRE", base + "ticks", retention},
        {"SADD", endpoint_.prefix + "jobs", obs.job},
    };
    auto replies = Pipeline(cmds);
    if (!replies) return tl::unexpected(replies.error());
    for (const ReplyPtr& r : *replies) {
      if (r->type == REDIS_REPLY_ERROR) return MakeError(context_, std::string(Str(r.get())));
    }
    return {};
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    std::vector<std::string> jobs;
    if (job.empty()) {
      auto members = Pipeline({{"SMEMBERS", endpoint_.prefix + "jobs"}});
      if (!members) return tl::unexpected(members.error());
      const redisReply* set = members->front().get();
      for (std::size_t i = 0; set->type == REDIS_REPLY_ARRAY && i < set->elements; ++i) {
        jobs.emplace_back(Str(set->element[i]));
      }
    } else {
      jobs.emplace_back(job);
    }
    // The newest `limit` ticks of each job, merged newest first (then by job name).
    const std::string stop = limit < 0 ? "-1" : std::to_string(std::max(limit, 1) - 1);
    std::vector<Command> ranges;
    for (const std::string& j : jobs) ranges.push_back({"ZREVRANGE", Base(j) + "ticks", "0", stop});
    auto ranked = Pipeline(ranges);
    if (!ranked) return tl::unexpected(ranked.error());
    std::vector<std::pair<std::int64_t, std::string>> keys;  // (T, job)
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const redisReply* r = (*ranked)[j].get();
      for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
        keys.emplace_back(Int(r->element[i]), jobs[j]);
      }
    }
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
      return std::tie(b.first, a.second) < std::tie(a.first, b.second);
    });
    if (limit >= 0 && keys.size() > static_cast<std::size_t>(limit)) keys.resize(limit);
    std::vector<Command> reads;
    for (const auto& [tick, j] : keys) {
      reads.push_back({"HGETALL", Base(j) + "t:" + std::to_string(tick)});
    }
    auto details = Pipeline(reads);
    if (!details) return tl::unexpected(details.error());
    std::vector<TickHistory> out;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      TickHistory h;
      h.tick_unix = keys[k].first;
      h.job = keys[k].second;
      // The record's own fields, and "o:<node>" → that replica's observation.
      auto rec = Fields((*details)[k].get());
      std::map<std::string, std::string> obs;
      for (auto it = rec.lower_bound("o:"); it != rec.end() && it->first.starts_with("o:");) {
        obs.emplace(it->first.substr(2), std::move(it->second));
        it = rec.erase(it);
      }
      if (rec.empty() && obs.empty()) continue;  // expired since the index was read
      if (!rec.empty()) {
        h.winner = Get(rec, "node");
        h.state = Get(rec, "state");
        h.run_outcome = Get(rec, "outcome");
        if (const std::string exit = Get(rec, "exit"); !exit.empty()) h.exit_code = std::stoi(exit);
        h.duration = milliseconds(std::stoll("0" + Get(rec, "duration")));
        h.fence = std::stoull("0" + Get(rec, "fence"));
        h.config_hash = Get(rec, "hash");
      }
      for (const auto& [node, value] : obs)
        h.observations.push_back(DecodeObservation(h, node, value));
      out.push_back(std::move(h));
    }
    return out;
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    auto jobs = JobNames();
    if (!jobs) return tl::unexpected(jobs.error());
    std::vector<Command> calls;
    for (const std::string& job : *jobs) {
      calls.push_back({"EVAL", std::string(kListRunningLua), "1", Base(job) + "ticks", Base(job)});
    }
    auto replies = Pipeline(calls);
    if (!replies) return tl::unexpected(replies.error());
    std::vector<RunningClaim> out;
    for (std::size_t j = 0; j < jobs->size(); ++j) {
      const redisReply* r = (*replies)[j].get();
      if (r->type == REDIS_REPLY_ERROR) {
        return MakeError(context_ + ": list running", std::string(Str(r)));
      }
      for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
        const redisReply* row = r->element[i];
        if (row->type != REDIS_REPLY_ARRAY || row->elements != 5) continue;
        RunningClaim c;
        c.job = (*jobs)[j];
        c.tick_unix = Int(row->element[0]);
        c.node = Str(row->element[1]);
        c.fence = static_cast<std::uint64_t>(Int(row->element[2]));
        c.config_hash = Str(row->element[3]);
        const std::int64_t pttl = Int(row->element[4]);
        c.lease_left = milliseconds(std::max<std::int64_t>(0, pttl));
        c.holder_alive = pttl > 0;
        out.push_back(std::move(c));
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const RunningClaim& a, const RunningClaim& b) {
      return std::tie(a.tick_unix, a.job) < std::tie(b.tick_unix, b.job);
    });
    return out;
  }

  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    auto replies = Pipeline({{"EVAL", std::string(kForceReleaseLua), "1", Base(std::string(job)),
                              std::to_string(tick_unix)}});
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type == REDIS_REPLY_ERROR) {
      return MakeError(context_ + ": release", std::string(Str(r)));
    }
    const std::string_view answer = Str(r);
    if (answer == "released") return ForceReleaseStatus::kReleased;
    return answer == "alive" ? ForceReleaseStatus::kHolderAlive : ForceReleaseStatus::kNotRunning;
  }

  // One pipeline of GETs (commands the documented ACL already allows; no MGET).
  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    const std::string base = Base(std::string(job));
    std::vector<Command> gets;
    for (const std::int64_t tick : ticks) {
      gets.push_back({"GET", base + "out:" + std::to_string(tick)});
    }
    auto replies = Pipeline(gets);
    if (!replies) return tl::unexpected(replies.error());
    std::vector<std::string> out;
    for (const ReplyPtr& r : *replies) {
      if (r->type == REDIS_REPLY_ERROR) {
        return MakeError(context_ + ": outputs of " + std::string(job), std::string(Str(r.get())));
      }
      out.push_back(r->type == REDIS_REPLY_STRING ? std::string(Str(r.get())) : std::string());
    }
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    auto members = Pipeline({{"SMEMBERS", endpoint_.prefix + "jobs"}});
    if (!members) return tl::unexpected(members.error());
    std::vector<ScriptCall> calls;
    const redisReply* set = members->front().get();
    for (std::size_t i = 0; set->type == REDIS_REPLY_ARRAY && i < set->elements; ++i) {
      const std::string base = Base(std::string(Str(set->element[i])));
      calls.push_back(ScriptCall(Script::kPrune, {base + "ticks"},
                                 {std::to_string(cutoff), base,
                                  std::to_string(options_.retention.count())}));
    }
    auto replies = RunScripts(calls, {});
    if (!replies) return tl::unexpected(replies.error());
    int removed = 0;
    for (const ReplyPtr& r : *replies) {
      if (r->type == REDIS_REPLY_ERROR) return MakeError(context_, std::string(Str(r.get())));
      removed += static_cast<int>(Int(r.get()));
    }
    return removed;
  }

  Result<void> SetPause(const Pause& pause) override {
    auto replies = Pipeline({{"HSET", endpoint_.prefix + "pauses", pause.job, EncodePause(pause)}});
    if (!replies) return tl::unexpected(replies.error());
    if (const redisReply* r = replies->front().get(); r->type == REDIS_REPLY_ERROR) {
      return MakeError(context_ + ": pause " + pause.job, std::string(Str(r)));
    }
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    auto replies = Pipeline({{"HDEL", endpoint_.prefix + "pauses", std::string(job)}});
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type == REDIS_REPLY_ERROR) {
      return MakeError(context_ + ": resume " + std::string(job), std::string(Str(r)));
    }
    return Int(r) > 0;
  }

  Result<std::vector<Pause>> ListPauses() override {
    auto replies = Pipeline({{"HGETALL", endpoint_.prefix + "pauses"}});
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type == REDIS_REPLY_ERROR) return MakeError(context_ + ": pauses", std::string(Str(r)));
    std::vector<Pause> out;
    for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
      if (auto p = DecodePause(Str(r->element[i]), Str(r->element[i + 1]))) {
        out.push_back(std::move(*p));
      }
    }
    std::sort(out.begin(), out.end(), [](const Pause& a, const Pause& b) { return a.job < b.job; });
    return out;
  }

 private:
  std::string Base(const std::string& job) const { return endpoint_.prefix + "{" + job + "}:"; }

  // Every job name in Pjobs.
  Result<std::vector<std::string>> JobNames() {
    auto members = Pipeline({{"SMEMBERS", endpoint_.prefix + "jobs"}});
    if (!members) return tl::unexpected(members.error());
    std::vector<std::string> jobs;
    const redisReply* set = members->front().get();
    for (std::size_t i = 0; set->type == REDIS_REPLY_ARRAY && i < set->elements; ++i) {
      jobs.emplace_back(Str(set->element[i]));
    }
    return jobs;
  }

  // Claims or completes per script call: one on a cluster (or before a connection
  // said the server is none), up to kItemsPerCall on a plain server (see kClaimLua).
  std::size_t PerCall() const { return single_slot_calls_ ? 1 : kItemsPerCall; }

  // Script calls for items 0..n−1, per_call items each: KEYS = key(i) for the call's
  // items, then ARGV = what append_args(i, cmd) appends, item after item.
  template <typename KeyFn, typename ArgsFn>
  static std::vector<ScriptCall> GroupedCalls(Script script, std::size_t n, std::size_t per_call,
                                              KeyFn key, ArgsFn append_args) {
    std::vector<ScriptCall> calls;
    calls.reserve(n / per_call + 1);
    for (std::size_t from = 0; from < n; from += per_call) {
      const std::size_t to = std::min(n, from + per_call);
      ScriptCall call(script, {}, {});
      call.cmd[2] = std::to_string(to - from);
      for (std::size_t i = from; i < to; ++i) call.cmd.push_back(key(i));
      for (std::size_t i = from; i < to; ++i) append_args(i, call.cmd);
      calls.push_back(std::move(call));
    }
    return calls;
  }

  // Item i's answer among the replies of GroupedCalls(…, n, per_call, …): its element
  // of its call's array, or the call's own reply (an error) for every item of it.
  static const redisReply* ItemReply(const std::vector<ReplyPtr>& replies, std::size_t i,
                                     std::size_t per_call, std::size_t n) {
    return ItemOfCall(replies[i / per_call].get(), i, per_call, n);
  }
  // The same, given the reply of item i's call.
  static const redisReply* ItemOfCall(const redisReply* r, std::size_t i, std::size_t per_call,
                                      std::size_t n) {
    const std::size_t items = std::min(per_call, n - i / per_call * per_call);
    return r->type == REDIS_REPLY_ARRAY && r->elements == items ? r->element[i % per_call] : r;
  }

  static std::map<std::string, std::string> Fields(const redisReply* r) {
    std::map<std::string, std::string> out;
    for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
      out.emplace(Str(r->element[i]), Str(r->element[i + 1]));
    }
    return out;
  }

  static std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? "" : it->second;
  }

  // outcome \x1f node_wall_ms \x1f config_hash \x1f fence
  static std::string EncodeObservation(const Observation& obs) {
    return obs.outcome + '\x1f' + std::to_string(obs.node_wall.time_since_epoch().count()) +
           '\x1f' + obs.config_hash + '\x1f' + std::to_string(obs.fence);
  }

  static Observation DecodeObservation(const TickHistory& h, const std::string& node,
                                       const std::string& value) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t sep; (sep = value.find('\x1f', start)) != std::string::npos; start = sep + 1) {
      parts.push_back(value.substr(start, sep - start));
    }
    parts.push_back(value.substr(start));
    parts.resize(4);
    Observation obs;
    obs.job = h.job;
    obs.tick_unix = h.tick_unix;
    obs.node = node;
    obs.outcome = parts[0];
    obs.node_wall = WallTime(milliseconds(std::stoll("0" + parts[1])));
    obs.config_hash = parts[2];
    obs.fence = std::stoull("0" + parts[3]);
    return obs;
  }

  Result<ClaimOutcome> ParseClaim(const redisReply* r) const {
    if (r->type == REDIS_REPLY_ERROR) return MakeError(context_ + ": claim", std::string(Str(r)));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 7) {
      return MakeError(context_ + ": claim", "unexpected reply from the claim script");
    }
    const std::string_view status = Str(r->element[0]);
    ClaimOutcome out;
    out.store_ms = Int(r->element[6]);
    if (status == "early") {
      out.status = ClaimStatus::kEarly;
      return out;
    }
    if (status == "won") {
      out.status = ClaimStatus::kWon;
      out.fence = static_cast<std::uint64_t>(Int(r->element[1]));
      return out;
    }
    if (status == "missed") {
      out.status = ClaimStatus::kMissed;
      return out;
    }
    if (status == "store-reset") {
      out.status = ClaimStatus::kStoreReset;
      out.holder_tick_unix = Int(r->element[3]);  // the head's tick, 0 when none
      return out;
    }
    out.status = status == "busy"         ? ClaimStatus::kBusy
                 : status == "superseded" ? ClaimStatus::kSuperseded
                                          : ClaimStatus::kLost;
    out.holder_node = Str(r->element[2]);
    out.holder_tick_unix = Int(r->element[3]);
    out.holder_config_hash = Str(r->element[4]);
    out.holder_running = Int(r->element[5]) == 1;
    return out;
  }

  Result<ReplyPtr> RunScript(ScriptCall call) {
    std::vector<ScriptCall> calls;
    calls.push_back(std::move(call));
    auto replies = RunScripts(calls, {});
    if (!replies) return tl::unexpected(replies.error());
    ReplyPtr reply = std::move(replies->front());
    if (reply->type == REDIS_REPLY_ERROR) return MakeError(context_, std::string(Str(reply.get())));
    return reply;
  }

  // EVALSHA for every call in one pipeline (plus SADD of jobs not yet indexed on this
  // connection), then EVAL for the ones the server answered NOSCRIPT. One reply per
  // call, in order; a reply may be an error reply.
  // `weight`: how many claims or completes one call carries (for SendSpread).
  // `on_reply` (optional) sees each reply as it is read, with its index in `calls`
  // (an index past them is the SADD's).
  // `acked` (optional): then, on the same connection and under the same lock, WAIT
  // for endpoint_.wait_replicas replicas (at most until the deadline) and store how
  // many acknowledged every write so far.
  Result<std::vector<ReplyPtr>> RunScripts(std::vector<ScriptCall>& calls,
                                           const std::vector<std::string_view>& jobs,
                                           std::size_t weight = 1,
                                           const ReplyHook* on_reply = nullptr,
                                           int* acked = nullptr) {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = EnsureConnected(deadline); !ok) return tl::unexpected(ok.error());
    std::vector<Command> cmds;
    cmds.reserve(calls.size() + 1);
    for (ScriptCall& call : calls) {
      call.cmd[1] = shas_[static_cast<std::size_t>(call.script)];
      cmds.push_back(std::move(call.cmd));
    }
    Command index = {"SADD", endpoint_.prefix + "jobs"};
    for (const std::string_view job : jobs) {
      if (!indexed_jobs_.contains(job)) index.emplace_back(job);
    }
    const bool add_index = index.size() > 2;
    if (add_index) cmds.push_back(std::move(index));
    auto replies = SendSpread(cmds, deadline, weight, on_reply);
    if (!replies) return replies;
    if (add_index && replies->back()->type != REDIS_REPLY_ERROR) {
      indexed_jobs_.insert(cmds.back().begin() + 2, cmds.back().end());
    }
    if (add_index) replies->pop_back();
    std::vector<std::size_t> missing;
    std::vector<Command> retry;
    for (std::size_t i = 0; i < replies->size(); ++i) {
      if (Str((*replies)[i].get()).starts_with("NOSCRIPT")) {
        missing.push_back(i);
        retry.push_back(std::move(cmds[i]));
        retry.back()[0] = "EVAL";
        retry.back()[1] = kScripts[static_cast<std::size_t>(calls[i].script)];
      }
    }
    if (!retry.empty() && conn_) {  // (a demoted master's answers dropped conn_)
      auto again = SendLocked(retry, deadline);
      if (!again) return again;
      for (std::size_t k = 0; k < missing.size(); ++k)
        (*replies)[missing[k]] = std::move((*again)[k]);
    }
    if (acked != nullptr && conn_) {
      // The server answers WAIT within its timeout: leave it a quarter of what is left
      // to reach us before the socket's own timeout.
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      const std::string timeout_ms =
          std::to_string(std::max<std::int64_t>(1, left.count() * 3 / 4));
      auto waited = SendLocked(
          {{"WAIT", std::to_string(endpoint_.wait_replicas), timeout_ms}}, deadline);
      if (!waited) return tl::unexpected(waited.error());
      *acked = static_cast<int>(Int(waited->front().get()));
    }
    return replies;
  }

  Result<std::vector<ReplyPtr>> Pipeline(const std::vector<Command>& cmds) {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = EnsureConnected(deadline); !ok) return tl::unexpected(ok.error());
    return SendLocked(cmds, deadline);
  }

  // REQUIRES: mu_ held, connected. Sends the commands on conn_ (SendOn). An I/O error
  // or timeout drops the connection (the next call reconnects).
  Result<std::vector<ReplyPtr>> SendLocked(const std::vector<Command>& cmds,
                                           steady_clock::time_point deadline,
                                           const ReplyHook* on_reply = nullptr) {
    if (cluster_) return SendRouted(cmds, deadline, on_reply);
    auto replies = SendOn(conn_.get(), cmds, deadline, on_reply);
    if (!replies) return Fail(replies.error().detail);
    DropIfNoMaster(*replies);
    return replies;
  }

  // REQUIRES: mu_ held. A server that answers as no writable master any more —
  // READONLY (demoted to a replica by a failover), NOREPLICAS (min-replicas-to-write:
  // cut off from its replicas), MASTERDOWN, LOADING — keeps the connection only for
  // those answers, which the callers see as errors (fail closed): the next call
  // connects again, through the sentinels when the URL names them.
  void DropIfNoMaster(const std::vector<ReplyPtr>& replies) {
    for (const ReplyPtr& r : replies) {
      if (!r || r->type != REDIS_REPLY_ERROR) continue;
      const std::string_view text = Str(r.get());
      for (const std::string_view code : {"READONLY", "NOREPLICAS", "MASTERDOWN", "LOADING"}) {
        if (text.starts_with(code)) {
          Fail(std::string(text));
          return;
        }
      }
    }
    backoff_.Succeeded();
  }

  // REQUIRES: mu_ held, connected. As SendLocked, but a pipeline of 2 × kLaneMin
  // claims or more (`weight` per command) is dealt out over stripes of at least
  // kLaneMin, one per connection (conn_ and up to kLanes − 1 more), sent and read at
  // the same time. Dealt, not cut: command i goes on stripe i mod S, so the server
  // meets the commands in about the order given (the claim order of
  // lock/claim_spread.h: a replica's own slice first), not S places of it at once.
  // Why: with appendfsync always the server fsyncs once per event-loop turn and reads
  // at most 16 KB per connection in a turn, so a batch on one connection pays one
  // fsync (~3 ms on the bench's disk) per ~60 claims; eight connections put eight times
  // as many claims behind each fsync. Any stripe's failure fails the whole call and
  // drops every connection (fail closed: every claim of the batch is unknown).
  Result<std::vector<ReplyPtr>> SendSpread(const std::vector<Command>& cmds,
                                           steady_clock::time_point deadline,
                                           std::size_t weight, const ReplyHook* on_reply) {
    if (cluster_) return SendRouted(cmds, deadline, on_reply);
    std::vector<redisContext*> ctxs = {conn_.get()};
    const std::size_t total = cmds.size() * weight;
    // WAIT (?wait) counts the writes of one connection: a batch then stays on conn_.
    if (total >= 2 * kLaneMin && endpoint_.wait_replicas == 0) {
      OpenLanes(deadline);
      for (const ContextPtr& lane : lanes_) {
        if (lane && ctxs.size() < total / kLaneMin) ctxs.push_back(lane.get());
      }
    }
    if (ctxs.size() == 1) return SendLocked(cmds, deadline, on_reply);
    const std::size_t stripes = ctxs.size();
    std::vector<std::vector<std::size_t>> dealt(stripes);
    for (std::size_t i = 0; i < cmds.size(); ++i) dealt[i % stripes].push_back(i);
    auto parts = SendParallel(ctxs, dealt, cmds, deadline, on_reply);
    std::vector<ReplyPtr> replies = NoReplies(cmds.size());
    for (std::size_t k = 0; k < stripes; ++k) {
      if (!parts[k]) return Fail(parts[k].error().detail);
      for (std::size_t j = 0; j < parts[k]->size(); ++j)
        replies[dealt[k][j]] = std::move((*parts[k])[j]);
    }
    DropIfNoMaster(replies);
    return replies;
  }

  // Sends the commands at indices groups[k] on ctxs[k], every connection at the same
  // time (a thread each but the first, which is this one's); one result per group.
  std::vector<Result<std::vector<ReplyPtr>>> SendParallel(
      const std::vector<redisContext*>& ctxs, const std::vector<std::vector<std::size_t>>& groups,
      const std::vector<Command>& cmds, steady_clock::time_point deadline,
      const ReplyHook* on_reply) const {
    std::vector<Result<std::vector<ReplyPtr>>> parts(ctxs.size());
    const auto send = [&](std::size_t k) {
      parts[k] = SendOn(ctxs[k], cmds, groups[k], deadline, on_reply);
    };
    std::vector<std::thread> threads;
    for (std::size_t k = 1; k < ctxs.size(); ++k) {
      try {
        threads.emplace_back(send, k);
      } catch (const std::system_error&) {
        send(k);  // no thread to spare: this one goes after the others
      }
    }
    if (!ctxs.empty()) send(0);
    for (std::thread& t : threads) t.join();
    return parts;
  }

  // REQUIRES: mu_ held, connected, cluster_. Redis Cluster: each command goes to the
  // node that serves its key's hash slot (slots_, from CLUSTER SLOTS), all nodes at
  // the same time; a job's keys share one slot, so each script call has one node. A
  // MOVED answer (the slot moved since the map was read) reloads the map and sends
  // that command again, twice at most; it is not handed to on_reply meanwhile. An ASK
  // answer (the slot is being migrated and the command's keys are not on the node
  // asked) is followed once, map unchanged (FollowAsk). What still says MOVED or ASK
  // stays an error reply: the caller fails closed for those jobs.
  Result<std::vector<ReplyPtr>> SendRouted(const std::vector<Command>& cmds,
                                           steady_clock::time_point deadline,
                                           const ReplyHook* on_reply) {
    std::vector<ReplyPtr> replies = NoReplies(cmds.size());
    const ReplyHook hand_over = [&](std::size_t i, const redisReply* r) {
      if (on_reply != nullptr && !IsMoved(r) && !IsAsk(r)) (*on_reply)(i, r);
    };
    std::vector<std::size_t> pending(cmds.size());
    std::iota(pending.begin(), pending.end(), std::size_t{0});
    for (int round = 0; !pending.empty(); ++round) {
      std::map<redisContext*, std::vector<std::size_t>> by_node;
      for (const std::size_t i : pending) {
        auto node = NodeFor(cmds[i], deadline);
        if (!node) return Fail(node.error().detail);
        by_node[*node].push_back(i);
      }
      std::vector<redisContext*> ctxs;
      std::vector<std::vector<std::size_t>> groups;
      for (auto& [ctx, indices] : by_node) {
        ctxs.push_back(ctx);
        groups.push_back(std::move(indices));
      }
      auto parts = SendParallel(ctxs, groups, cmds, deadline, &hand_over);
      std::vector<std::size_t> moved;
      std::vector<std::pair<redisContext*, std::size_t>> asked;  // (the node asked, command)
      for (std::size_t k = 0; k < parts.size(); ++k) {
        if (!parts[k]) return Fail(parts[k].error().detail);
        for (std::size_t j = 0; j < parts[k]->size(); ++j) {
          const std::size_t i = groups[k][j];
          replies[i] = std::move((*parts[k])[j]);
          if (IsMoved(replies[i].get())) moved.push_back(i);
          if (IsAsk(replies[i].get())) asked.emplace_back(ctxs[k], i);
        }
      }
      if (auto ok = FollowAsk(asked, cmds, replies, deadline, on_reply); !ok)
        return Fail(ok.error().detail);
      if (moved.empty() || round == 2) break;
      if (auto ok = LoadSlots(deadline); !ok) return Fail(ok.error().detail);
      pending = std::move(moved);
    }
    backoff_.Succeeded();
    return replies;
  }

  // REQUIRES: mu_ held, cluster_. Follows the ASK answers to cmds[i] from the node
  // `from` (`asked`): each command goes, once, to the node the ASK names, right after
  // an ASKING (the slot map stays as it is: the slot moves for good only when the
  // migration ends, and then MOVED says so). Its answer replaces the ASK in replies[i]
  // and is handed to on_reply.
  // Script calls need more care. The importing node runs a command after ASKING when
  // it holds the keys the command declares, and a script declares only its job's key
  // base "P{job}:", which never exists: the importing node would decide a claim with
  // whatever part of the job's keys (head, record, run key) MIGRATE has moved so far,
  // the rest read as missing: a tick already claimed could be won again. So a script
  // call follows ASK only when the migrating node holds no key of the slot any more
  // (CLUSTER COUNTKEYSINSLOT = 0: every key of the job is on the importing node, and no
  // new key can appear on the migrating one, which redirects missing keys); otherwise
  // its ASK stays an error reply (fail closed) until the migration ends.
  Result<void> FollowAsk(const std::vector<std::pair<redisContext*, std::size_t>>& asked,
                         const std::vector<Command>& cmds, std::vector<ReplyPtr>& replies,
                         steady_clock::time_point deadline, const ReplyHook* on_reply) {
    std::map<std::pair<redisContext*, std::string>, bool> slot_empty;  // (from, slot)
    std::map<std::string, std::vector<std::size_t>> by_target;
    for (const auto& [from, i] : asked) {
      const Command& cmd = cmds[i];
      const auto [slot, target] = RedirectionTarget(replies[i].get());
      if (target.empty()) continue;
      if (cmd.front() == "EVAL" || cmd.front() == "EVALSHA") {
        auto [it, fresh] = slot_empty.try_emplace({from, slot}, false);
        if (fresh) {
          auto count = SendOn(from, std::vector<Command>{{"CLUSTER", "COUNTKEYSINSLOT", slot}},
                              deadline);
          if (!count) return tl::unexpected(count.error());
          const redisReply* r = count->front().get();
          it->second = r->type == REDIS_REPLY_INTEGER && r->integer == 0;
        }
        if (!it->second) continue;
      }
      by_target[target].push_back(i);
    }
    for (const auto& [target, indices] : by_target) {
      auto node = NodeAt(target, deadline);
      if (!node) return tl::unexpected(node.error());
      std::vector<Command> asking;
      for (const std::size_t i : indices) {
        asking.push_back({"ASKING"});
        asking.push_back(cmds[i]);
      }
      auto answers = SendOn(*node, asking, deadline);
      if (!answers) return tl::unexpected(answers.error());
      for (std::size_t k = 0; k < indices.size(); ++k) {
        replies[indices[k]] = std::move((*answers)[2 * k + 1]);
        if (on_reply != nullptr) (*on_reply)(indices[k], replies[indices[k]].get());
      }
    }
    return {};
  }

  // REQUIRES: mu_ held, connected, cluster_. The connection to the node serving
  // `cmd`'s key (the seed's for a command without a key), opened when missing.
  Result<redisContext*> NodeFor(const Command& cmd, steady_clock::time_point deadline) {
    const std::optional<std::string_view> key = RoutingKey(cmd);
    if (!key) return conn_.get();
    const int slot = KeySlot(*key);
    const auto range = std::upper_bound(slots_.begin(), slots_.end(), slot,
                                        [](int s, const SlotRange& r) { return s < r.first; });
    if (range == slots_.begin() || std::prev(range)->last < slot) {
      return MakeError(context_, "no node serves hash slot " + std::to_string(slot) +
                                     " (the cluster is not ready)");
    }
    return NodeAt(std::prev(range)->node, deadline);
  }

  // REQUIRES: mu_ held, connected, cluster_. The connection to the node at
  // "host:port", opened when missing.
  Result<redisContext*> NodeAt(const std::string& node, steady_clock::time_point deadline) {
    if (node == SeedAddress()) return conn_.get();
    ContextPtr& c = nodes_.try_emplace(node, nullptr, &redisFree).first->second;
    if (!c) {
      const auto colon = node.rfind(':');
      auto dialed = Dial(node.substr(0, colon), std::atoi(node.c_str() + colon + 1), deadline);
      if (!dialed) return tl::unexpected(dialed.error());
      c = std::move(*dialed);
    }
    return c.get();
  }

  std::string SeedAddress() const { return endpoint_.host + ":" + std::to_string(endpoint_.port); }

  // REQUIRES: mu_ held, conn_ open. Reads which node serves which slots (CLUSTER SLOTS
  // on the seed: [first, last, [host, port, id], replicas…] per range).
  Result<void> LoadSlots(steady_clock::time_point deadline) {
    auto replies = SendOn(conn_.get(), std::vector<Command>{{"CLUSTER", "SLOTS"}}, deadline);
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type != REDIS_REPLY_ARRAY) {
      return MakeError(context_, "CLUSTER SLOTS: " + std::string(Str(r)));
    }
    std::vector<SlotRange> slots;
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply* range = r->element[i];
      if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
      const redisReply* primary = range->element[2];
      if (primary->type != REDIS_REPLY_ARRAY || primary->elements < 2) continue;
      std::string host(Str(primary->element[0]));
      if (host.empty()) host = endpoint_.host;  // "": the node we asked
      slots.push_back(SlotRange{static_cast<int>(range->element[0]->integer),
                                static_cast<int>(range->element[1]->integer),
                                host + ":" + std::to_string(primary->element[1]->integer)});
    }
    std::sort(slots.begin(), slots.end(),
              [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
    slots_ = std::move(slots);
    return {};
  }

  // REQUIRES: mu_ held. Connects the missing extra connections of SendSpread; after a
  // failed attempt, not again for 2 s (the batch then goes on fewer connections).
  void OpenLanes(steady_clock::time_point deadline) {
    if (steady_clock::now() < lanes_retry_at_) return;
    for (ContextPtr& lane : lanes_) {
      if (lane) continue;
      auto conn = Dial(endpoint_.host, endpoint_.port, deadline);
      if (!conn) {
        lanes_retry_at_ = steady_clock::now() + std::chrono::seconds(2);
        return;
      }
      lane = std::move(*conn);
    }
  }

  // Sends the commands on `c` in chunks (kChunkBytes, at most kChunk commands) and
  // reads the replies while later chunks are on their way: at most two chunks are
  // unanswered, so the server works on the first claims of a batch while the client
  // still formats the last ones, and the first answers are read as they come (one
  // 10,000-claim write would also make hiredis move its whole output buffer on every
  // partial write). Touches nothing but `c`: SendSpread and SendRouted run it on
  // several connections at once, each sending the commands of `all` at the indices
  // `which`. `on_reply` sees each reply as it is read, with its command's index in
  // `all`. Returns the replies in the order of `which`.
  Result<std::vector<ReplyPtr>> SendOn(redisContext* c, std::span<const Command> all,
                                       steady_clock::time_point deadline,
                                       const ReplyHook* on_reply = nullptr) const {
    std::vector<std::size_t> every(all.size());
    std::iota(every.begin(), every.end(), std::size_t{0});
    return SendOn(c, all, every, deadline, on_reply);
  }
  Result<std::vector<ReplyPtr>> SendOn(redisContext* c, std::span<const Command> all,
                                       std::span<const std::size_t> which,
                                       steady_clock::time_point deadline,
                                       const ReplyHook* on_reply) const {
    constexpr std::size_t kChunk = 256;
    constexpr std::size_t kChunkBytes = 64 * 1024;
    const ScopedSigpipeBlock no_sigpipe;
    const std::size_t n = which.size();
    const auto index = [&](std::size_t k) { return which[k]; };
    std::vector<ReplyPtr> replies;
    replies.reserve(n);
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    std::vector<std::size_t> chunk_ends;  // k after the last command of each chunk sent
    std::size_t answered_chunks = 0;
    std::size_t sent = 0;
    while (replies.size() < n) {
      if (sent < n && chunk_ends.size() - answered_chunks < 2) {
        // Each chunk waits at most for what is left of the call's deadline.
        const auto left =
            std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
        if (left <= milliseconds(0)) return MakeError(context_, NoAnswer());
        if (redisSetTimeout(c, ToTimeval(left)) != REDIS_OK) return MakeError(context_, c->errstr);
        std::size_t bytes = 0;
        for (const std::size_t chunk_start = sent;
             sent < n && sent - chunk_start < kChunk && bytes < kChunkBytes; ++sent) {
          argv.clear();
          lens.clear();
          for (const std::string& a : all[index(sent)]) {
            argv.push_back(a.data());
            lens.push_back(a.size());
            bytes += a.size() + 8;
          }
          if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(),
                                     lens.data()) != REDIS_OK) {
            return MakeError(context_, c->errstr);
          }
        }
        chunk_ends.push_back(sent);
        for (int done = 0; !done;) {
          if (redisBufferWrite(c, &done) != REDIS_OK) return MakeError(context_, IoDetail(c));
        }
        continue;
      }
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
        return MakeError(context_, IoDetail(c));
      }
      replies.emplace_back(static_cast<redisReply*>(raw), &freeReplyObject);
      if (on_reply != nullptr) (*on_reply)(index(replies.size() - 1), replies.back().get());
      if (replies.size() == chunk_ends[answered_chunks]) ++answered_chunks;
    }
    return replies;
  }

  std::string NoAnswer() const {
    return "no answer within " + std::to_string(options_.op_timeout.count()) + "ms";
  }

  // What a failed read or write of `c` means: a socket timeout is "no answer".
  std::string IoDetail(const redisContext* c) const {
    return c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
               ? NoAnswer()
               : std::string(c->errstr);
  }

  // Drops the connections after an I/O failure and schedules the next attempt.
  tl::unexpected<Error> Fail(const std::string& detail) {
    conn_.reset();
    for (ContextPtr& lane : lanes_) lane.reset();
    nodes_.clear();
    backoff_.Failed(detail);
    return tl::unexpected(Error(context_, detail));
  }

  Result<void> EnsureConnected(steady_clock::time_point deadline) {
    if (conn_) return {};
    if (auto may = backoff_.MayConnect(context_); !may) return may;
    return Connect(deadline);
  }

  // REQUIRES: mu_ held. Opens conn_ (Dial); a refusal by the server (AUTH, SELECT)
  // waits longer before the next attempt than a network failure.
  Result<void> Connect(steady_clock::time_point deadline) {
    conn_.reset();
    nodes_.clear();
    indexed_jobs_.clear();
    bool refused = false;
    auto conn = endpoint_.sentinels.empty()
                    ? Dial(endpoint_.host, endpoint_.port, deadline, &refused, &cluster_)
                    : DialMaster(deadline, &refused);
    if (!conn && refused) {
      backoff_.FailedHard(conn.error().detail);
      return tl::unexpected(conn.error());
    }
    if (!conn) return Fail(conn.error().detail);
    conn_ = std::move(*conn);
    if (cluster_ && !endpoint_.sentinels.empty()) {
      return Fail("the master named by the sentinels is a Redis Cluster node: use redis://");
    }
    if (cluster_ && endpoint_.wait_replicas > 0) {
      conn_.reset();
      backoff_.FailedHard("?wait is not supported on Redis Cluster");
      return MakeError(context_, "?wait is not supported on Redis Cluster (WAIT counts one "
                                 "node's replicas): remove it from the URL");
    }
    if (cluster_) {
      if (auto ok = LoadSlots(deadline); !ok) return Fail(ok.error().detail);
    }
    return {};
  }

  // REQUIRES: mu_ held. Redis Sentinel: asks the sentinels in turn (starting with the
  // one that answered last) for the address of the master they watch (`SENTINEL
  // get-master-addr-by-name`), connects to it (Dial) and checks with `ROLE` that it is
  // a master: a sentinel that has not yet seen a failover names the demoted one. The
  // first master found is the connection; endpoint_ then holds its address (lanes
  // connect there too). Each sentinel gets a share of the time left, so a silent one
  // does not use up the deadline of the others. *refused: the master refused the
  // credentials (as Dial).
  Result<ContextPtr> DialMaster(steady_clock::time_point deadline, bool* refused) {
    std::string tried;  // what each sentinel said, for the error
    const std::size_t n = endpoint_.sentinels.size();
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t which = (next_sentinel_ + k) % n;
      const HostPort& sentinel = endpoint_.sentinels[which];
      const auto share = (deadline - steady_clock::now()) / static_cast<int>(n - k + 1);
      const auto until = steady_clock::now() + share;
      tried += (tried.empty() ? "" : "; ") + sentinel.host + ":" + std::to_string(sentinel.port);
      auto master = AskSentinel(sentinel, until);
      if (!master) {
        tried += ": " + master.error().detail;
        continue;
      }
      tried += " names " + master->host + ":" + std::to_string(master->port);
      auto conn = Dial(master->host, master->port, deadline, refused);
      if (!conn) {
        if (refused != nullptr && *refused) return conn;
        tried += ": " + conn.error().detail;
        continue;
      }
      auto role = SendOn(conn->get(), std::vector<Command>{{"ROLE"}}, deadline);
      if (!role) {
        tried += ": ROLE: " + role.error().detail;
        continue;
      }
      const redisReply* r = role->front().get();
      const std::string_view is =
          r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? Str(r->element[0]) : Str(r);
      if (is != "master") {
        tried += ", which says it is " + (is.empty() ? std::string("no master") : std::string(is));
        continue;
      }
      next_sentinel_ = which;
      endpoint_.host = master->host;
      endpoint_.port = master->port;
      return conn;
    }
    return MakeError(context_, "no sentinel named a master '" + endpoint_.master_name +
                                   "' that answers as one (" + tried + ")");
  }

  // The address one sentinel gives for the master (no connection is kept). A sentinel
  // that asks for a password (NOAUTH) gets the URL's user and password.
  Result<HostPort> AskSentinel(const HostPort& sentinel, steady_clock::time_point deadline) const {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    ContextPtr conn(redisConnectWithTimeout(sentinel.host.c_str(), sentinel.port, ToTimeval(left)),
                    &redisFree);
    if (!conn) return MakeError(context_, "cannot allocate a connection");
    if (conn->err) return MakeError(context_, std::string("cannot connect: ") + conn->errstr);
    const Command ask = {"SENTINEL", "get-master-addr-by-name", endpoint_.master_name};
    auto replies = SendOn(conn.get(), std::vector<Command>{ask}, deadline);
    if (replies && Str(replies->front().get()).starts_with("NOAUTH") &&
        !endpoint_.password.empty()) {
      replies = SendOn(conn.get(),
                       std::vector<Command>{AuthCommand(), ask}, deadline);
      if (replies) replies->erase(replies->begin());
    }
    if (!replies) return tl::unexpected(replies.error());
    const redisReply* r = replies->front().get();
    if (r->type == REDIS_REPLY_NIL) return MakeError(context_, "knows no master of that name");
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      return MakeError(context_, "unexpected answer '" + std::string(Str(r)) + "'");
    }
    HostPort master{std::string(Str(r->element[0])), 0};
    if (!ParseInt(Str(r->element[1]), master.port)) {
      return MakeError(context_, "bad port in the answer");
    }
    return master;
  }

  Command AuthCommand() const {
    return endpoint_.user.empty() ? Command{"AUTH", endpoint_.password}
                                  : Command{"AUTH", endpoint_.user, endpoint_.password};
  }

  // A new connection to host:port (the URL's server, or a node of its cluster):
  // connected, authenticated, db selected, scripts loaded (shas_: the same on every
  // server). *refused: the server answered with an error (AUTH / SELECT / NOPERM; its
  // text never contains the password). *cluster: the server is a Redis Cluster node.
  Result<ContextPtr> Dial(const std::string& host, int port, steady_clock::time_point deadline,
                          bool* refused = nullptr, bool* cluster = nullptr) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    ContextPtr conn(redisConnectWithTimeout(host.c_str(), port, ToTimeval(left)), &redisFree);
    if (!conn) return MakeError(context_, "cannot allocate a connection");
    if (conn->err) return MakeError(context_, std::string("cannot connect: ") + conn->errstr);
    std::vector<Command> setup;
    if (!endpoint_.password.empty()) {
      setup.push_back(endpoint_.user.empty() ? Command{"AUTH", endpoint_.password}
                                             : Command{"AUTH", endpoint_.user, endpoint_.password});
    }
    if (endpoint_.db != 0) setup.push_back({"SELECT", std::to_string(endpoint_.db)});
    for (std::string_view script : kScripts)
      setup.push_back({"SCRIPT", "LOAD", std::string(script)});
    // Whether a script call may touch several jobs (several hash slots): only on a
    // server that says it is no cluster; an error (INFO not allowed) means one job.
    setup.push_back({"INFO", "cluster"});
    auto replies = SendOn(conn.get(), setup, deadline);
    if (!replies) return tl::unexpected(replies.error());
    single_slot_calls_ = Str(replies->back().get()).find("cluster_enabled:0") == std::string::npos;
    if (cluster != nullptr)
      *cluster = Str(replies->back().get()).find("cluster_enabled:1") != std::string::npos;
    replies->pop_back();
    for (const ReplyPtr& r : *replies) {
      if (r->type == REDIS_REPLY_ERROR) {
        if (refused != nullptr) *refused = true;
        return MakeError(context_, std::string(Str(r.get())));
      }
    }
    const std::size_t first_sha = replies->size() - std::size(kScripts);
    for (std::size_t i = 0; i < std::size(kScripts); ++i) {
      shas_[i] = std::string(Str((*replies)[first_sha + i].get()));
    }
    return conn;
  }

  const RedisOptions options_;
  Endpoint endpoint_;
  const std::string context_;  // "redis <url with the password masked>"
  std::mutex mu_;
  ContextPtr conn_;
  // SendSpread's extra connections (null until opened), and when to try again after
  // one could not be opened.
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kLaneMin = 512;
  // Claims or completes per script call on a plain server (kClaimLua); false until a
  // connection said so: one per call, as a cluster needs. Read without mu_ (PerCall).
  static constexpr std::size_t kItemsPerCall = 32;
  std::atomic<bool> single_slot_calls_{true};
  std::vector<ContextPtr> lanes_;
  steady_clock::time_point lanes_retry_at_;
  // Redis Cluster (the URL's server said cluster_enabled:1): which node serves which
  // hash slots, and a connection to each node other than the URL's (conn_), opened
  // when first needed (SendRouted).
  bool cluster_ = false;
  // Redis Sentinel: the sentinel to ask first (the one that answered last).
  std::size_t next_sentinel_ = 0;
  struct SlotRange {
    int first;
    int last;
    std::string node;  // "host:port"
  };
  std::vector<SlotRange> slots_;  // sorted by first
  std::map<std::string, ContextPtr> nodes_;
  std::string shas_[std::size(kScripts)];
  // Jobs already in Pjobs (since this connection); looked up by string_view.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> indexed_jobs_;
  ReconnectBackoff backoff_;  // when to try connecting again after failures
  CompleteBatcher completer_{
      [this](std::span<const CompleteRequest> reqs) { return CompleteBatch(reqs); }};
};

}  // namespace

Result<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options) {
  auto endpoint = ParseUrl(options.url);
  if (!endpoint) {
    Error e = endpoint.error();
    e.context = "redis " + RedactUrl(options.url);
    return tl::unexpected(std::move(e));
  }
  auto backend = std::make_unique<RedisBackend>(options, std::move(*endpoint));
  if (auto ok = backend->Open(); !ok) return tl::unexpected(ok.error());
  return backend;
}

}  // namespace tickd::lock
