#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/config/env.h"

using namespace gyre;

TEST_CASE("a unique id round-trips its root address, secret and mode") {
  for (const char* text : {"127.0.0.1:29500", "[::1]:4242", "10.1.2.3:1"}) {
    UniqueIdContents in;
    std::string why;
    REQUIRE(NetAddress::parse(text, &in.root, &why));
    in.secret = randomSecret();
    in.fixedAddress = text[0] == '1';
    ncclUniqueId id;
    encodeUniqueId(in, &id);
    UniqueIdContents out;
    REQUIRE(decodeUniqueId(id, &out) == ncclSuccess);
    CHECK(out.root.toString() == in.root.toString());
    CHECK(out.secret == in.secret);
    CHECK(out.fixedAddress == in.fixedAddress);
  }
}

TEST_CASE("a unique id of zeros or random bytes is rejected before any connection") {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  UniqueIdContents out;
  CHECK(decodeUniqueId(id, &out) == ncclInvalidArgument);
  srand(7);
  for (int trial = 0; trial < 100; ++trial) {
    for (char& c : id.internal) c = static_cast<char>(rand());
    CHECK(decodeUniqueId(id, &out) == ncclInvalidArgument);
  }
}

TEST_CASE("flipping any byte of a valid unique id is detected") {
  UniqueIdContents in;
  std::string why;
  REQUIRE(NetAddress::parse("192.168.0.7:5555", &in.root, &why));
  in.secret = 0x1234567890abcdefull;
  ncclUniqueId good;
  encodeUniqueId(in, &good);
  for (size_t i = 0; i < sizeof(good.internal); ++i) {
    ncclUniqueId bad = good;
    bad.internal[i] ^= 0x40;
    UniqueIdContents out;
    CHECK(decodeUniqueId(bad, &out) == ncclInvalidArgument);
  }
}

TEST_CASE("fresh secrets differ from each other") {
  CHECK(randomSecret() != randomSecret());
}

TEST_CASE("addresses parse host:port and [v6]:port, and reject bad ports") {
  NetAddress a;
  std::string why;
  CHECK(NetAddress::parse("127.0.0.1:80", &a, &why));
  CHECK(a.port() == 80);
  CHECK(a.isLoopback());
  CHECK(NetAddress::parse("[::1]:81", &a, &why));
  CHECK(a.family() == AF_INET6);
  CHECK(a.toString() == "[::1]:81");
  CHECK_FALSE(NetAddress::parse("127.0.0.1", &a, &why));
  CHECK_FALSE(NetAddress::parse("127.0.0.1:0", &a, &why));
  CHECK_FALSE(NetAddress::parse("127.0.0.1:70000", &a, &why));
  CHECK_FALSE(NetAddress::parse("[::1:5", &a, &why));
}

namespace {

// Sets the launcher variables for one case and re-reads gyre's settings; restores
// the process's own values (a CI job may run under Slurm) when it goes.
class JobEnv {
 public:
  static constexpr const char* kNames[] = {"NCCL_COMM_ID", "GYRE_JOB_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                           "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};
  JobEnv() {
    for (const char* n : kNames) {
      const char* v = getenv(n);
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(n);
    }
  }
  ~JobEnv() {
    for (auto& [n, v] : saved_) v ? setenv(n, v->c_str(), 1) : unsetenv(n);
    env::reloadForTesting();
  }
  // The NCCL_COMM_ID id's secret with exactly `vars` set besides NCCL_COMM_ID.
  uint64_t secretWith(const std::vector<std::pair<const char*, const char*>>& vars,
                      const char* commId = "127.0.0.1:29500") {
    for (const char* n : kNames) unsetenv(n);
    setenv("NCCL_COMM_ID", commId, 1);
    for (auto& [n, v] : vars) setenv(n, v, 1);
    env::reloadForTesting("/nonexistent/nccl.conf");
    bool used = false;
    ncclUniqueId id;
    UniqueIdContents c;
    if (uniqueIdFromCommIdEnv(&used, &id) != ncclSuccess || !used || decodeUniqueId(id, &c) != ncclSuccess)
      return 0;
    return c.secret;
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("with NCCL_COMM_ID the secret is the same for one job and differs between jobs at one address") {
  JobEnv e;
  const uint64_t none = e.secretWith({});
  REQUIRE(none != 0);
  CHECK(e.secretWith({}) == none);
  CHECK(e.secretWith({}, "127.0.0.1:29501") != none);
  // Each launcher's job id, alone, separates two jobs and agrees within one.
  const std::vector<std::vector<std::pair<const char*, const char*>>> jobA = {
      {{"GYRE_JOB_ID", "a"}},
      {{"SLURM_JOB_ID", "100"}, {"SLURM_STEP_ID", "0"}},
      {{"OMPI_MCA_ess_base_jobid", "3124756481"}},
      {{"PMIX_NAMESPACE", "prterun-host-1234@1"}},
      {{"TORCHELASTIC_RUN_ID", "run-a"}}};
  const std::vector<std::vector<std::pair<const char*, const char*>>> jobB = {
      {{"GYRE_JOB_ID", "b"}},
      {{"SLURM_JOB_ID", "100"}, {"SLURM_STEP_ID", "1"}},  // the next srun step of one allocation
      {{"OMPI_MCA_ess_base_jobid", "3124756482"}},
      {{"PMIX_NAMESPACE", "prterun-host-1234@2"}},
      {{"TORCHELASTIC_RUN_ID", "run-b"}}};
  for (size_t i = 0; i < jobA.size(); ++i) {
    INFO("launcher " << jobA[i][0].first);
    const uint64_t a = e.secretWith(jobA[i]);
    CHECK(a != none);
    CHECK(e.secretWith(jobA[i]) == a);
    CHECK(e.secretWith(jobB[i]) != a);
  }
  // A job named by both a launcher and GYRE_JOB_ID needs both to agree.
  CHECK(e.secretWith({{"SLURM_JOB_ID", "7"}, {"GYRE_JOB_ID", "x"}}) !=
        e.secretWith({{"SLURM_JOB_ID", "7"}, {"GYRE_JOB_ID", "y"}}));
}

TEST_CASE("launcherJobId names the variables it mixed in, and is empty without a launcher") {
  JobEnv e;
  e.secretWith({});
  CHECK(launcherJobId().empty());
  e.secretWith({{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "3"}, {"GYRE_JOB_ID", "mine"}});
  CHECK(launcherJobId() == "GYRE_JOB_ID=mine SLURM_JOB_ID=42 SLURM_STEP_ID=3");
}
