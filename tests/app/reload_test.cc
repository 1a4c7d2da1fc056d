// Reloading the job file: a bad file is rejected whole and the old jobs keep
// running; a valid one replaces the job set.
#include "app/reload.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

class JobFile {
 public:
  JobFile() {
    std::string templ = (std::filesystem::temp_directory_path() / "tickd-reload-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    dir_ = templ;
    path_ = (dir_ / "jobs.yaml").string();
  }
  ~JobFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  const std::string& path() const { return path_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

std::string FileWithJobs(const std::vector<std::string>& names, const std::string& typo = "") {
  std::string text = "version: 1\nlock:\n  backend: none\njobs:\n";
  for (const std::string& n : names) {
    text += "  - name: " + n + "\n    schedule" + typo + ": \"* * * * *\"\n    shell: \"true\"\n";
  }
  return text;
}

TEST_CASE("reload: a valid file replaces the jobs, a bad one is rejected whole") {
  JobFile file;
  file.Write(FileWithJobs({"a", "b"}));
  Sim sim(WallAt(kT0, -1'000));
  Scheduler& s = sim.AddReplica("n", {});
  CHECK(ReloadJobs(file.path(), s, sim.log));
  CHECK(s.job_names() == std::vector<std::string>{"a", "b"});
  CHECK(sim.Grep({" info reload ", "outcome=applied jobs=2"}).size() == 1);

  file.Write(FileWithJobs({"c"}, "x"));  // "schedulex": an unknown key
  CHECK_FALSE(ReloadJobs(file.path(), s, sim.log));
  CHECK(s.job_names() == std::vector<std::string>{"a", "b"});
  CHECK(sim.Grep({" warn reload ", "outcome=rejected"}).size() == 1);
  CHECK_FALSE(sim.Grep({" error config ", "schedulex"}).empty());

  sim.Step(seconds(1));  // the old jobs still tick
  sim.WaitQuiet();
  CHECK(sim.Grep({"job=a", "tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"job=b", "tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);

  file.Write(FileWithJobs({"c"}));
  CHECK(ReloadJobs(file.path(), s, sim.log));
  CHECK(s.job_names() == std::vector<std::string>{"c"});
  sim.Step(seconds(60));
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"job=c", "tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
}

TEST_CASE("LoadJobFile: the settings, and the enabled jobs once, as the job set") {
  JobFile file;
  file.Write(FileWithJobs({"a", "b"}) +
             "  - name: off\n    schedule: \"0 * * * *\"\n    shell: \"true\"\n"
             "    enabled: false\n"
             "shutdown_grace: 7s\n");
  auto loaded = LoadJobFile(file.path());
  REQUIRE(loaded);
  CHECK(loaded->config.lock.backend == "none");
  CHECK(loaded->config.shutdown_grace == seconds(7));
  CHECK(loaded->config.jobs.empty());  // the jobs are only in the job set
  REQUIRE(loaded->jobs.size() == 2);
  CHECK(loaded->jobs[0]->job.name == "a");
  CHECK(loaded->jobs[1]->job.name == "b");
  CHECK(loaded->jobs[1]->next(kT0) == kT0 + 60);

  file.Write(FileWithJobs({"a"}, "x"));
  auto bad = LoadJobFile(file.path());
  REQUIRE_FALSE(bad);
  std::string errors;
  for (const config::ConfigError& e : bad.error()) errors += e.ToString() + "\n";
  CHECK(errors.find(file.path() + ":6:5: jobs[0].schedulex") != std::string::npos);
}

TEST_CASE("a missing job file is rejected too") {
  Sim sim(WallAt(kT0));
  Scheduler& s = sim.AddReplica("n", {EveryJob("keep", 60)});
  CHECK_FALSE(ReloadJobs("/nonexistent/tickd/jobs.yaml", s, sim.log));
  CHECK(s.job_names() == std::vector<std::string>{"keep"});
}

TEST_CASE("file identity changes with a rewrite") {
  JobFile file;
  file.Write("a");
  auto first = IdentifyFile(file.path());
  REQUIRE(first);
  CHECK(IdentifyFile(file.path()) == first);
  file.Write("bb");
  CHECK_FALSE(IdentifyFile(file.path()) == first);
  CHECK_FALSE(IdentifyFile("/nonexistent/x"));
}

}  // namespace
}  // namespace tickd::app::testing
