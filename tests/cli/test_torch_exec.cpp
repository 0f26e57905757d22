// Issue 35 item 7: the full build's `vitsim` links neither LibTorch nor MPI, so that no command pays their
// loading; `vitsim train` and a measuring `vitsim calibrate` parse their flags in vitsim and then become
// `vitsim-torch` by execv() with the same arguments (app/torch/exec.cpp, docs/architecture.md "The process
// model"). A stand-in put in its place by VITSIM_TORCH_EXE records what it was started with.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "test_util.hpp"

#if VITSIM_TEST_HAVE_REAL
namespace {
// The files the dynamic loader opens while `command` runs (LD_DEBUG=files: one "file=NAME [0];" line each,
// at start-up and at any dlopen), so that a library loaded later than start-up counts too.
std::string files_loaded(const std::string& command) {
  const vt::CmdResult r = vt::run("LD_DEBUG=files " + command);
  std::string files;
  for (size_t a = r.out.find("file="); a != std::string::npos; a = r.out.find("file=", a + 5))
    files += r.out.substr(a, r.out.find_first_of(" \n", a) - a) + "\n";
  return files;
}

// A stand-in for vitsim-torch: writes its pid, arguments (one a line), a variable of the environment and its
// standard input into `d`, prints a line on stdout and one on stderr, and exits 7.
std::string stand_in(const vt::TempDir& d) {
  const std::string path =
      d.file("stand-in", "#!/bin/sh\necho $$ > " + d / "pid" + "\nprintf '%s\\n' \"$@\" > " + d / "args" +
                             "\necho \"$VITSIM_TEST_MARK\" > " + d / "env" + "\ncat > " + d / "stdin" +
                             "\necho out; echo err >&2\nexit 7\n");
  REQUIRE(vt::run("chmod +x " + path).status == 0);
  return path;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("vitsim loads no LibTorch and no MPI, train does (in vitsim-torch)", "[cli][torch_exec]") {
  const std::string version = files_loaded(std::string(VITSIM_BINARY) + " --version");
  const std::string predict =
      files_loaded(std::string(VITSIM_BINARY) + " predict " +
                   vt::source("scenarios/study/vector-strong-b64.xml") + " --set cluster.gpus_per_node=1 -q");
  // What a train loads, through the exec: vitsim-torch reads the scenario (which does not exist) after
  // start-up.
  const std::string train = files_loaded(std::string(VITSIM_BINARY) + " train nope.xml");
  INFO("vitsim --version loaded:\n" << version << "vitsim train loaded:\n" << train);
  // The check sees them where they are: the train's process maps both.
  CHECK_THAT(train, Catch::Contains("file=libtorch") && Catch::Contains("file=libmpi"));
  for (const std::string* loaded : {&version, &predict}) {
    CHECK_THAT(*loaded, Catch::Contains("file=libsimgrid"));  // the loader's lines were read
    CHECK_THAT(*loaded, !Catch::Contains("file=libtorch") && !Catch::Contains("file=libc10") &&
                            !Catch::Contains("file=libmpi"));
  }
}

TEST_CASE("vitsim train and calibrate become vitsim-torch: arguments, environment, streams, pid, status",
          "[cli][torch_exec]") {
  vt::TempDir d;
  const std::string exe = stand_in(d);
  d.file("in", "hello\n");
  // `exec env ... vitsim`: vitsim keeps the shell's pid ($$), and so does the stand-in if vitsim execs it (a
  // child would have another).
  const std::string run =
      "echo $$; exec env VITSIM_TEST_MARK=kept VITSIM_TORCH_EXE=" + exe + " " + VITSIM_BINARY;
  for (const std::string args : {"train 'a b.xml' --set training.lr=0.5 --set run.max_steps=3 -q",
                                 "calibrate s.xml --out c.json --micro-batches 4,8 --sizes 4KiB"}) {
    INFO(args);
    vt::run("rm -f " + d / "args" + " " + d / "pid");
    auto r = vt::run(run + " " + args + " <" + d / "in");
    CHECK(r.status == 7);
    CHECK(r.out == read(d / "pid") + "out\nerr\n");
    CHECK(read(d / "env") == "kept\n");
    CHECK(read(d / "stdin") == "hello\n");
    const std::string expected =
        args[0] == 't' ? "train\na b.xml\n--set\ntraining.lr=0.5\n--set\nrun.max_steps=3\n-q\n"
                       : "calibrate\ns.xml\n--out\nc.json\n--micro-batches\n4,8\n--sizes\n4KiB\n";
    CHECK(read(d / "args") == expected);
  }
  const std::string env = "VITSIM_TORCH_EXE=" + exe + " ";

  // What vitsim answers itself, the stand-in never started: help, command-line errors, calibrate's imports
  // (no Torch).
  vt::run("rm -f " + d / "args");
  auto help = vt::run(env + VITSIM_BINARY + " train --help");
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Catch::Contains("--save-params") && Catch::Contains("--resume"));
  // One definition: vitsim-torch's help is the same, but for the program's name in its usage line.
  std::string torch_help = vt::run(std::string(VITSIM_TORCH_BINARY) + " train --help").out;
  const size_t name = torch_help.find("vitsim-torch train");
  REQUIRE(name != std::string::npos);
  CHECK(help.out == torch_help.replace(name, 12, "vitsim"));
  auto bad = vt::run(env + VITSIM_BINARY + " train s.xml --resum");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.out, Catch::StartsWith("vitsim: error: vitsim train: unknown option '--resum' (did you mean "
                                        "'--resume'?)"));
  auto imp = vt::run(env + VITSIM_BINARY + " calibrate nope.xml --from-nccl-tests x.log --out c.json -q");
  CHECK(imp.status == 1);
  CHECK(imp.out == "vitsim: error: nope.xml: cannot open scenario file\n");
  CHECK(vt::run("test -e " + d / "args").status != 0);
}

TEST_CASE("without vitsim-torch, train, calibrate and validate --run say how to rebuild",
          "[cli][torch_exec]") {
  vt::TempDir d;
  const std::string sc = d.file("s.xml", read(vt::source("scenarios/study/vector-strong-b64.xml")));
  const std::string env = "VITSIM_TORCH_EXE=" + d / "missing" + " ";
  const std::string rebuild =
      "rebuild with cmake -S . -B build -DVITSIM_WITH_TORCH=ON "
      "-DTorch_DIR=/path/to/libtorch/share/cmake/Torch "
      "&& cmake --build build --target vitsim\n";
  for (const char* command : {"train", "calibrate"}) {
    auto r = vt::run(env + VITSIM_BINARY + " " + command + " s.xml --out o.json");
    CHECK(r.status == 2);
    CHECK(r.out ==
          fmt::format("vitsim {}: {} is missing (it runs train and calibrate): ", command, d / "missing") +
              rebuild);
  }
  auto v = vt::run(env + VITSIM_BINARY + " validate " + sc + " --run -q");
  CHECK(v.status == 2);
  CHECK(v.out ==
        "vitsim: error: validate --run trains with " + d / "missing" + ", which is missing: " + rebuild);
}
#endif
