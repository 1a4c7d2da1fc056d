// The daemon's job set holds each job once: each ScheduledJob keeps its compiled
// schedule in place, and the scheduler hands out the set it runs (shared, not copied).
#include "app/scheduled_job.h"

#include <type_traits>

#include "app/tzdata.h"
#include "cron/tzdata_version.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

// A ScheduledJob's next/prev point into the object itself, so it must not be copied.
static_assert(!std::is_copy_constructible_v<ScheduledJob>);
static_assert(!std::is_copy_assignable_v<ScheduledJob>);

std::vector<config::Job> ThreeJobs() {
  std::vector<config::Job> jobs(3);
  const char* names[] = {"hourly", "off", "daily"};
  const char* schedules[] = {"0 * * * *", "* * * * *", "30 6 * * *"};
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].name = names[i];
    jobs[i].schedule_text = schedules[i];
    jobs[i].shell = "echo " + std::string(names[i]);
    jobs[i].env["WHO"] = names[i];
  }
  jobs[1].enabled = false;
  return jobs;
}

void CheckSet(const JobSet& set) {
  REQUIRE(set.size() == 2);  // the disabled job is not scheduled
  CHECK(set[0]->job.name == "hourly");
  CHECK(set[0]->job.shell == "echo hourly");
  CHECK(set[0]->job.env.at("WHO") == "hourly");
  // Every claim carries the job's hash and the tz database version in use.
  CHECK(set[0]->config_hash == set[0]->job.ConfigHash() + " tz=" + cron::TzdataVersionInUse());
  CHECK(SplitClaimHash(set[0]->config_hash).config == set[0]->job.ConfigHash());
  CHECK(set[1]->job.name == "daily");
  // kT0 is 2026-11-21T14:00:00Z.
  CHECK(set[0]->next(kT0) == kT0 + 3'600);
  CHECK(set[0]->prev(kT0) == kT0 - 3'600);
  CHECK(set[1]->next(kT0) == kT0 + 16 * 3'600 + 30 * 60);
  CHECK(set[1]->prev(kT0) == kT0 - 7 * 3'600 - 30 * 60);
  REQUIRE(set[1]->schedule);
  CHECK(set[1]->schedule->expression() == "30 6 * * *");
}

TEST_CASE("MakeJobSet: the enabled jobs, each with its compiled schedule") {
  const std::vector<config::Job> jobs = ThreeJobs();
  Result<JobSet> set = MakeJobSet(jobs);
  REQUIRE(set);
  CheckSet(*set);
  CHECK(jobs.size() == 3);  // the source is untouched
  CHECK(jobs[0].name == "hourly");
}

TEST_CASE("MakeJobSet: a job whose schedule does not parse is an error naming it") {
  std::vector<config::Job> jobs = ThreeJobs();
  jobs[2].schedule_text = "61 * * * *";
  Result<JobSet> set = MakeJobSet(jobs);
  REQUIRE_FALSE(set);
  CHECK(set.error().ToString().find("job daily") != std::string::npos);
}

TEST_CASE("Scheduler::jobs shares the job definitions it runs, in name order") {
  Sim sim(WallAt(kT0));
  auto b = EveryJob("b", 60);
  auto a = EveryJob("a", 60);
  Scheduler& s = sim.AddReplica("n", {b, a});
  JobSet now = s.jobs();
  REQUIRE(now.size() == 2);
  CHECK(now[0] == a);  // the same objects: nothing was copied
  CHECK(now[1] == b);
  CHECK(s.job_names() == std::vector<std::string>{"a", "b"});

  auto c = EveryJob("c", 60);
  s.Reload({c, b});
  now = s.jobs();
  REQUIRE(now.size() == 2);
  CHECK(now[0] == b);
  CHECK(now[1] == c);
}

}  // namespace
}  // namespace tickd::app::testing
