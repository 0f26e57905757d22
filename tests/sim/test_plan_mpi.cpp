// vitsim plan across MPI ranks (vitsim-plan-mpi under mpirun) against the plan run in one process tree.
#include <catch2/catch.hpp>

#include "test_util.hpp"
#include "vitsim/core/base/io.hpp"

TEST_CASE("mpirun -np 2 vitsim-plan-mpi equals vitsim plan on one machine", "[plan][mpi]") {
  vt::TempDir d;
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  const std::string opts =
      " -q -j 1 --set training.micro_batch=8,16,32 --set parallelism.overlap=false,true --deadline 10h";
  REQUIRE(vt::vitsim("plan " + scen + opts + " --format json --out " + d / "one.json").status == 0);
  auto r =
      vt::run(fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} {}{} --format json --out {}",
                          VITSIM_PLAN_MPI, scen, opts, d / "mpi.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(vitsim::read_file(d / "mpi.json") == vitsim::read_file(d / "one.json"));
  // A failing shard fails the job with its message.
  auto bad = vt::run(
      fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} {} -q --set training.precision=fp64",
                  VITSIM_PLAN_MPI, scen));
  CHECK(bad.status != 0);
  CHECK(bad.out.find("vitsim plan --shard") != std::string::npos);
}

TEST_CASE("vitsim-plan-mpi reads --top as vitsim plan does", "[plan][mpi][negative]") {
  // core's parse_integer with vitsim plan's range (0 .. 2^30), not std::stoi ("1.5" was 1, "x" an abort).
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  for (const auto& [top, why] : std::vector<std::pair<std::string, std::string>>{
           {"1.5", "'1.5' is not an integer in 0 .. 1073741824"},
           {"x", "'x' is not an integer in 0 .. 1073741824"},
           {"-1", "-1 is out of range (expected 0 .. 1073741824)"}}) {
    INFO(top);
    auto r = vt::run(fmt::format("mpirun --allow-run-as-root --oversubscribe -np 1 {} {} -q --top {}",
                                 VITSIM_PLAN_MPI, scen, top));
    CHECK(r.status != 0);  // rank 0's status 1, as mpirun passes it on
    CHECK(r.out.find("vitsim-plan-mpi: error: --top: " + why + "\n") != std::string::npos);
  }
}

// Issue 27: a shard with a failed point (here its simulation refuses: ~48 KiB per rank is over 1 KiB) exits 6
// with its JSON written; the job merges it like the others, the point excluded as failed, and exits 6.
TEST_CASE("vitsim-plan-mpi merges a shard whose point failed, and exits 6", "[plan][mpi][points]") {
  vt::TempDir d;
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  const std::string opts = " -q -j 1 --set simulation.max_memory=1KiB,1GiB";
  auto one = vt::vitsim("plan " + scen + opts + " --format json --out " + d / "one.json");
  CHECK(one.status == 6);
  auto r =
      vt::run(fmt::format("mpirun --allow-run-as-root --oversubscribe -np 2 {} {}{} --format json --out {}",
                          VITSIM_PLAN_MPI, scen, opts, d / "mpi.json"));
  INFO(r.out);
  CHECK(r.status == 6);
  // The scenario sweeps 5 node counts: 10 points, the 5 of 1 KiB failed.
  CHECK(r.out.find("vitsim-plan-mpi: error: 5 of 10 points failed; the plan lists them with their reason") !=
        std::string::npos);
  CHECK(vitsim::read_file(d / "mpi.json") == vitsim::read_file(d / "one.json"));
}
