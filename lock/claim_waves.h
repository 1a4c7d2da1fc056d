// The claims of one batch in waves and chunks, for backends that decide a chunk of
// claims with a few round trips but cannot write one key twice in one step (etcd,
// ZooKeeper). A wave holds at most one claim of each job, so a job's ticks are
// decided in the order of the batch (a later tick after an earlier one: superseded
// or won, as claims one by one would be). Each wave goes to `claim_chunk` in chunks
// within a ChunkLimit, each of claims of one kind, likely_decided or not: the
// replica's own slice goes out at once, not behind a probe of claims whose owners
// have not decided them yet (which then found them open and claimed them too). A
// claim that lost a race it may still win (a version or head moved under it) is
// returned by `claim_chunk` and goes into the next wave, before its job's later
// ticks, at most `max_tries` times; then it answers `gave_up`. After a chunk set
// `failed` (the store gave no answer), every claim not answered yet answers that
// error at once: fail closed, without waiting for the operation timeout once per
// chunk.
#ifndef TICKD_LOCK_CLAIM_WAVES_H_
#define TICKD_LOCK_CLAIM_WAVES_H_

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "lock/backend.h"

namespace tickd::lock {

// How many claims go into one chunk: at most `claims`, and, with `bytes_of`, no more
// than add up to `bytes` of it (a store's request size limit; one claim at least).
struct ChunkLimit {
  std::size_t claims = 1;
  std::size_t bytes = 0;
  std::function<std::size_t(const ClaimRequest&)> bytes_of;
};

// ClaimChunk: std::vector<std::size_t>(std::span<const std::size_t> chunk,
//                                       std::optional<Error>& failed)
// answers (on_answer) every claim of `chunk` (indices into `reqs`) but those it returns.
template <typename ClaimChunk>
void ClaimInWaves(std::span<const ClaimRequest> reqs, const ChunkLimit& limit, int max_tries,
                  const Backend::ClaimAnswer& on_answer, const Error& gave_up,
                  ClaimChunk claim_chunk) {
  std::vector<std::size_t> pending(reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) pending[i] = i;
  std::vector<int> tries(reqs.size(), 0);
  std::optional<Error> failed;
  while (!pending.empty()) {
    std::vector<std::size_t> wave, later;
    std::set<std::string_view> jobs;
    for (const std::size_t i : pending) {
      (jobs.insert(reqs[i].job).second ? wave : later).push_back(i);
    }
    for (std::size_t first = 0, end = 0; first < wave.size(); first = end) {
      const bool likely_decided = reqs[wave[first]].likely_decided;
      std::size_t bytes = 0;
      for (end = first; end < wave.size() && end - first < limit.claims; ++end) {
        const ClaimRequest& req = reqs[wave[end]];
        if (req.likely_decided != likely_decided) break;
        if (limit.bytes_of) bytes += limit.bytes_of(req);
        if (end > first && bytes > limit.bytes) break;
      }
      const std::span<const std::size_t> chunk(wave.data() + first, end - first);
      if (failed) {
        for (const std::size_t i : chunk) on_answer(i, tl::unexpected(*failed));
        continue;
      }
      for (const std::size_t i : claim_chunk(chunk, failed)) {
        if (++tries[i] < max_tries) {
          later.push_back(i);
        } else {
          on_answer(i, tl::unexpected(gave_up));
        }
      }
    }
    std::sort(later.begin(), later.end());  // a retried claim stays before its job's later ticks
    pending = std::move(later);
  }
}

// ClaimBatch through ClaimBatchAsAnswered: the answers in the order of the requests.
inline std::vector<Result<ClaimOutcome>> CollectAnswers(Backend& backend,
                                                        std::span<const ClaimRequest> reqs) {
  std::vector<Result<ClaimOutcome>> out(reqs.size(), ClaimOutcome{});
  backend.ClaimBatchAsAnswered(
      reqs, [&](std::size_t i, Result<ClaimOutcome> r) { out[i] = std::move(r); });
  return out;
}

}  // namespace tickd::lock

#endif  // TICKD_LOCK_CLAIM_WAVES_H_
