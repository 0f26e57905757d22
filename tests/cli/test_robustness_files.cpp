// Files, outputs and process lifetime (issue 12): what vitsim writes onto links, FIFOs, devices and
// folders; outputs that are inputs; standard output that cannot be written; inputs that are not regular
// files or are too large; and Ctrl-C / SIGTERM / SIGHUP / SIGKILL during a run. The command-line cases
// render docs/robustness.md's table between the test_robustness_files markers (VITSIM_UPDATE_DOCS=1
// rewrites it). Devices are made here with mknod in a temporary folder (1,3 is null, 1,5 zero, 1,7 full):
// nothing under /dev is written.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"

#ifndef VITSIM_PLAN_MPI  // built without MPI: the distributed plan's case is skipped
#define VITSIM_PLAN_MPI ""
#endif

namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// /proc/PID/stat of a process that may end at any moment: reading it then fails with ESRCH, which libstdc++
// throws from inside the stream; a process gone reads as "".
std::string proc_stat(const std::string& path) {
  try {
    return slurp(path);
  } catch (const std::exception&) {
    return "";
  }
}

// The message of the Error `fn` throws ("" when it throws none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const vitsim::Error& e) {
    return e.what();
  }
  return "";
}

void make_device(const std::string& path, unsigned minor) {  // 1,3 null; 1,5 zero; 1,7 full
  REQUIRE(mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) == 0);
}

void make_socket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  close(fd);  // the socket file stays
}

mode_t type_of(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

// A valid base for the command-line cases: test_robustness's 2-node platform and a short scenario on it.
std::string platform() {
  return vt::platform_xml(2, 4, "12GBps", "1us", {"1GBps", "1GBps"}, {"8Tf", "8Tf"});
}
std::string scenario(const std::string& extra = "") {
  return "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"2\"/>\n  <model "
         "preset=\"vit_b_16\"/>\n"
         "  <dataset name=\"cifar10\"/>\n  <training micro_batch=\"16\"/>\n  <simulation steps=\"3\" "
         "warmup=\"1\"/>\n" +
         extra + "</scenario>\n";
}
// A report to feed back (plot, validate --measured, plan --merge): what predict writes.
const char* kReportArgs = "predict s.xml -q --format json --out r.json";

}  // namespace

// ------------------------------------------------------------------------------------------------------
// Unit tests of the io functions.

TEST_CASE("write_file_atomic replaces regular files and new names atomically, keeping permissions",
          "[io][files]") {
  vt::TempDir d;
  const std::string f = d / "a.json";
  vitsim::write_file_atomic(f, "one");
  CHECK(slurp(f) == "one");
  REQUIRE(chmod(f.c_str(), 0640) == 0);
  vitsim::write_file_atomic(f, "two");
  CHECK(slurp(f) == "two");
  struct stat st {};
  REQUIRE(stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  // Chunks: many small ones and one larger than the writer's 64 KiB buffer.
  vitsim::write_file_atomic(d / "chunks", [](const vitsim::ChunkSink& sink) {
    for (int i = 0; i < 1000; ++i) sink("ab", 2);
    const std::string big(100000, 'x');
    sink(big.data(), big.size());
  });
  CHECK(fs::file_size(d / "chunks") == 2000 + 100000);
  // No temporary left behind, and a failing producer leaves the old content.
  CHECK_THROWS(vitsim::write_file_atomic(f, [](const vitsim::ChunkSink& sink) {
    sink("x", 1);
    throw std::runtime_error("boom");
  }));
  CHECK(slurp(f) == "two");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d.path))
    entries += e.path().filename().string().find(".tmp.") == std::string::npos;
  CHECK(entries == 2);
  for (const auto& e : fs::directory_iterator(d.path))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("write_file_atomic follows symbolic links and writes their targets and the links stay",
          "[io][files]") {
  vt::TempDir d;
  fs::create_directories(d / "sub");
  d.file("sub/target.json", "old");
  fs::create_symlink("sub/target.json", d / "rel");      // relative
  fs::create_symlink(d / "sub/target.json", d / "abs");  // absolute
  fs::create_symlink("rel", d / "chain");                // a link to a link
  fs::create_symlink("sub/new.json", d / "dangling");    // to a name not there yet
  for (const std::string link : {"rel", "abs", "chain"}) {
    INFO(link);
    vitsim::write_file_atomic(d / link, "via " + link);
    CHECK(type_of(d / link) == S_IFLNK);
    CHECK(slurp(d / "sub/target.json") == "via " + link);
  }
  vitsim::write_file_atomic(d / "dangling", "created");
  CHECK(type_of(d / "dangling") == S_IFLNK);
  CHECK(slurp(d / "sub/new.json") == "created");
  // A link loop is refused.
  fs::create_symlink("loop2", d / "loop1");
  fs::create_symlink("loop1", d / "loop2");
  CHECK(error_of([&] { vitsim::write_file_atomic(d / "loop1", "x"); }) ==
        "cannot write " + (d / "loop1") + ": Too many levels of symbolic links");
}

TEST_CASE("write_file_atomic writes through FIFOs and character devices and refuses folders and sockets",
          "[io][files]") {
  vt::TempDir d;
  // A FIFO: its reader gets the content; it stays a FIFO.
  const std::string fifo = d / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  vitsim::write_file_atomic(fifo, "through the pipe");
  reader.join();
  CHECK(got == "through the pipe");
  CHECK(type_of(fifo) == S_IFIFO);
  // Devices: null takes it, full fails with the system's reason; both stay devices.
  make_device(d / "null", 3);
  make_device(d / "full", 7);
  vitsim::write_file_atomic(d / "null", "gone");
  CHECK(type_of(d / "null") == S_IFCHR);
  CHECK(error_of([&] { vitsim::write_file_atomic(d / "full", "x"); }) ==
        "cannot write " + (d / "full") + ": No space left on device");
  CHECK(type_of(d / "full") == S_IFCHR);
  // A link to a device writes the device.
  fs::create_symlink("null", d / "to-null");
  vitsim::write_file_atomic(d / "to-null", "gone");
  CHECK(type_of(d / "to-null") == S_IFLNK);
  // Refused: a folder, a socket; check_writable refuses them the same way, before any work.
  fs::create_directories(d / "dir");
  make_socket(d / "sock");
  CHECK(error_of([&] { vitsim::write_file_atomic(d / "dir", "x"); }) ==
        "cannot write " + (d / "dir") + ": Is a directory");
  CHECK(error_of([&] { vitsim::check_writable(d / "dir"); }) ==
        "cannot write " + (d / "dir") + ": Is a directory");
  CHECK(error_of([&] { vitsim::write_file_atomic(d / "sock", "x"); }) ==
        "cannot write " + (d / "sock") +
            ": it is a socket; vitsim writes regular files, FIFOs and character devices");
  CHECK(type_of(d / "sock") == S_IFSOCK);
  CHECK(error_of([&] { vitsim::check_writable(d / "no/such/dir/x.json"); }) ==
        "cannot write " + (d / "no/such/dir/x.json") + ": No such file or directory");
  CHECK(error_of([&] { vitsim::check_writable(d / "null"); }).empty());
  CHECK(error_of([&] { vitsim::check_writable(d / "dangling-new"); }).empty());
}

TEST_CASE("check_output_paths compares files by identity: the same file under other names is caught",
          "[io][files]") {
  vt::TempDir d;
  const std::string s = d.file("s.xml", "<scenario/>");
  fs::create_directories(d / "sub");
  fs::create_symlink("s.xml", d / "link.xml");
  REQUIRE(link(s.c_str(), (d / "hard.xml").c_str()) == 0);
  const std::vector<vitsim::NamedPath> in{{s, "the scenario"}, {"", "--calibration"}};
  for (const std::string& out :
       {s, d.path.string() + "/./s.xml", d / "sub/../s.xml", d / "link.xml", d / "hard.xml"}) {
    INFO(out);
    CHECK(error_of([&] {
            vitsim::check_output_paths({{out, "--out"}}, in);
          }) == "--out '" + out + "' is the scenario '" + s + "': an output must not overwrite an input");
  }
  // Two outputs, existing or not, under different names.
  CHECK(error_of([&] {
          vitsim::check_output_paths({{d / "x.json", "--out"}, {d / "sub/../x.json", "--trace"}}, in);
        }) == "--out '" + (d / "x.json") + "' and --trace '" + (d / "sub/../x.json") +
                  "' are the same file: one output would overwrite the other");
  CHECK(error_of([&] {
          vitsim::check_output_paths({{d / "new", "--out"}, {d / "dangling", "--trace"}}, in);
        }).empty());
  fs::create_symlink("new", d / "dangling");  // now a link to the name --out creates
  CHECK(!error_of([&] {
           vitsim::check_output_paths({{d / "new", "--out"}, {d / "dangling", "--trace"}}, in);
         }).empty());
  // Writing through a device or FIFO twice loses nothing: allowed.
  make_device(d / "null", 3);
  CHECK(error_of([&] {
          vitsim::check_output_paths({{d / "null", "--out"}, {d / "null", "--trace"}}, in);
        }).empty());
  // Distinct files pass; an unwritable output fails first.
  CHECK(error_of([&] {
          vitsim::check_output_paths({{d / "a", "--out"}, {d / "b", "--trace"}, {"", "--x"}}, in);
        }).empty());
  CHECK(error_of([&] {
          vitsim::check_output_paths({{d / "none/a", "--out"}}, in);
        }) == "cannot write " + (d / "none/a") + ": No such file or directory");
}

TEST_CASE("read_input_file refuses what is not a regular file, without blocking, and files above the limit",
          "[io][files]") {
  vt::TempDir d;
  const std::string ok = d.file("ok.xml", "<scenario/>");
  CHECK(vitsim::read_input_file(ok, "scenario file") == "<scenario/>");
  fs::create_symlink("ok.xml", d / "link.xml");
  CHECK(vitsim::read_input_file(d / "link.xml", "scenario file") == "<scenario/>");
  REQUIRE(mkfifo((d / "fifo").c_str(), 0644) == 0);  // no writer: opening it must not wait for one
  make_device(d / "zero", 5);
  make_socket(d / "sock");
  fs::create_directories(d / "dir");
  fs::create_symlink("loop2", d / "loop1");
  fs::create_symlink("loop1", d / "loop2");
  const std::vector<std::pair<std::string, std::string>> refused{
      {"fifo", "scenario file is a FIFO, not a regular file"},
      {"zero", "scenario file is a character device, not a regular file"},
      {"sock", "cannot open scenario file: No such device or address"},
      {"dir", "scenario file is a directory, not a regular file"},
      {"loop1", "cannot open scenario file: Too many levels of symbolic links"},
      {"missing", "cannot open scenario file"},
  };
  for (const auto& [name, why] : refused) {
    INFO(name);
    CHECK(error_of([&] { vitsim::read_input_file(d / name, "scenario file"); }) == (d / name) + ": " + why);
  }
  // The size limit: the argument, the default and VITSIM_MAX_INPUT_SIZE.
  const std::string big = d.file("big.json", std::string(2048, ' '));
  CHECK(error_of([&] { vitsim::read_input_file(big, "report", 1024); }) ==
        big +
            ": report is 2.00 KiB, above the 1.00 KiB limit for an input (VITSIM_MAX_INPUT_SIZE raises it, "
            "e.g. "
            "VITSIM_MAX_INPUT_SIZE=1GiB)");
  CHECK(vitsim::input_size_limit() == vitsim::kDefaultInputLimit);
  setenv("VITSIM_MAX_INPUT_SIZE", "1KiB", 1);
  CHECK(vitsim::input_size_limit() == 1024);
  CHECK(!error_of([&] { vitsim::read_input_file(big, "report"); }).empty());
  setenv("VITSIM_MAX_INPUT_SIZE", "4KiB", 1);
  CHECK(vitsim::read_input_file(big, "report").size() == 2048);
  setenv("VITSIM_MAX_INPUT_SIZE", "lots", 1);
  CHECK(error_of([] { vitsim::input_size_limit(); }).rfind("VITSIM_MAX_INPUT_SIZE: bad size 'lots'", 0) == 0);
  unsetenv("VITSIM_MAX_INPUT_SIZE");
  // read_file (vitsim's own files): no limit, still regular files only.
  CHECK(vitsim::read_file(big).size() == 2048);
  CHECK(error_of([&] { vitsim::read_file(d / "fifo"); }) ==
        (d / "fifo") + ": file is a FIFO, not a regular file");
}

TEST_CASE("TempDir folders are private, registered and removed", "[io][files]") {
  std::string path;
  {
    vitsim::TempDir t("vitsim-unit-");
    path = t.path();
    CHECK(fs::is_directory(path));
    CHECK(fs::path(path).filename().string().rfind("vitsim-unit-", 0) == 0);
    std::ofstream(path + "/a") << "x";
  }
  CHECK(!fs::exists(path));
  CHECK(vitsim::interrupted() == 0);
}

// ------------------------------------------------------------------------------------------------------
// The command-line cases (the table of docs/robustness.md).

namespace {

struct FileCase {
  const char* cls;
  const char* what;
  std::string setup;    // shell commands run first in the case's folder
  std::string command;  // "vitsim ..." (with shell redirections), run in that folder
  int status;
  std::string output;      // stdout and stderr together ("" for none)
  std::string check = "";  // a shell test that must then hold ("" = none)
  bool prefix = false;     // only the start of the output is checked
};

std::vector<FileCase> file_cases();

std::string escape(std::string s) {
  for (size_t p = 0; (p = s.find('|', p)) != std::string::npos; p += 2) s.replace(p, 1, "\\|");
  return s;
}

std::string render_files(const std::vector<FileCase>& all) {
  std::ostringstream o;
  o << "Every row is a case of `tests/cli/test_robustness_files.cpp`, which runs it, checks the exact "
       "output, the exit\n"
       "status and what must then hold, and regenerates this table (`VITSIM_UPDATE_DOCS=1\n"
       "build/tests/test_robustness_files`). Each runs in a fresh folder with the platform `p.xml` of the "
       "table above\n"
       "and a short scenario `s.xml` on it; `full`, `null` and `zero` are character devices the test makes "
       "there\n"
       "with mknod (1,7 / 1,3 / 1,5), `fifo` a FIFO.\n\n"
       "| # | class | case | setup | command | exit | output | then |\n| --- | --- | --- | --- | --- | --- | "
       "--- | --- |\n";
  int i = 0;
  for (const auto& c : all)
    o << "| " << ++i << " | " << c.cls << " | " << c.what << " | "
      << (c.setup.empty() ? "" : "`" + escape(c.setup) + "`") << " | `" << escape(c.command) << "` | "
      << c.status << " | "
      << (c.output.empty() ? "(none)" : "`" + escape(c.output) + (c.prefix ? " ...`" : "`")) << " | "
      << (c.check.empty() ? "" : "`" + escape(c.check) + "`") << " |\n";
  return o.str();
}

struct SignalCase {
  const char* what;
  std::string args;  // vitsim arguments, run in a folder with p.xml and the long scenario l.xml
  int sig;
  bool group;        // sent to the whole process group, as a terminal's Ctrl-C is
  const char* temp;  // a temporary folder that must exist before the signal
  std::string program = VITSIM_BINARY;
  bool mpirun = false;  // started by mpirun, which reports the job's end its own way
};

std::vector<SignalCase> signal_cases();

const char* sig_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGKILL";
}

std::string render_signals(const std::vector<SignalCase>& all) {
  std::ostringstream o;
  o << "\nInterruptions (`tests/cli/test_robustness_files.cpp`, \"interrupted runs\"): the command runs with "
       "`TMPDIR` set to\n"
       "a fresh folder; once its temporary folder and its children exist, the signal is sent. Then the exit "
       "status\n"
       "must be 128 + the signal, the last line `vitsim: interrupted by SIG...`, the `TMPDIR` folder empty "
       "and every\n"
       "child gone. After SIGKILL (which no process can handle) the children must still end "
       "(PR_SET_PDEATHSIG).\n\n"
       "| # | run | signal | sent to | exit |\n| --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all)
    o << "| " << ++i << " | " << c.what << " | " << sig_name(c.sig) << " | "
      << (c.group    ? "the process group (Ctrl-C)"
          : c.mpirun ? "each rank"
                     : "the vitsim process")
      << " | "
      << (c.sig == SIGKILL ? std::string("killed; children end with it")
          : c.mpirun       ? std::string("mpirun's")
                           : std::to_string(128 + c.sig))
      << " |\n";
  return o.str();
}

}  // namespace

TEST_CASE("outputs, inputs and standard output: each case's output, status and aftermath",
          "[robustness][files]") {
  const auto all = file_cases();
  CHECK(all.size() >= 40);
  for (const auto& c : all) {
    INFO(c.cls << ": " << c.what << "\n  " << c.command);
    vt::TempDir d;
    d.file("p.xml", platform());
    d.file("s.xml", scenario());
    const std::string cd = "cd '" + d.path.string() + "' && ";
    auto with_binary = [](std::string cmd) {
      for (size_t p = 0; (p = cmd.find("vitsim ", p)) != std::string::npos;
           p += std::strlen(VITSIM_BINARY) + 1)
        cmd.replace(p, 6, VITSIM_BINARY);
      return cmd;
    };
    if (!c.setup.empty()) REQUIRE(vt::run(cd + "(" + with_binary(c.setup) + ")").status == 0);
    const std::string cmd = with_binary(c.command);
    // `timeout`: a FIFO that blocked would fail the case instead of hanging the suite.
    auto r = vt::run(cd + "timeout 60 sh -c \"" + cmd + "\"");
    CHECK(r.status == c.status);
    if (c.prefix)
      CHECK(r.out.rfind(c.output, 0) == 0);
    else
      CHECK(r.out == (c.output.empty() ? "" : c.output + "\n"));
    if (!c.check.empty()) CHECK(vt::run(cd + "(" + c.check + ")").status == 0);
  }
}

TEST_CASE("robustness_files: docs/robustness.md's table is this file's cases", "[robustness][files][docs]") {
  const std::string doc = render_files(file_cases()) + render_signals(signal_cases());
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_robustness_files", doc) == doc);
}

// ------------------------------------------------------------------------------------------------------
// Interrupted runs.

namespace {

// The processes whose parent is `pid` (from /proc/*/stat).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = proc_stat(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid && state != 'Z') out.push_back(std::stoi(name));
  }
  return out;
}

// Alive: exists and is not a zombie (a zombie's parent has not reaped it yet; it runs no more).
bool alive(pid_t pid) {
  const std::string stat = proc_stat("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

size_t entries_starting(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

bool has_entry_starting(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

std::string long_scenario() {
  // 48 points of a 16-step simulation on 1 to 8 GPUs: long enough to be interrupted in the middle
  // (each point takes a fraction of a second to seconds), with -j 2 two children at a time.
  return "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"2\"/>\n  <model "
         "preset=\"vit_b_16\"/>\n"
         "  <dataset name=\"cifar10\"/>\n  <training micro_batch=\"16\"/>\n  <simulation steps=\"16\" "
         "warmup=\"1\"/>\n"
         "  <sweep param=\"training.micro_batch\" values=\"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\"/>\n"
         "  <sweep param=\"cluster.gpus_per_node\" values=\"2,3,4\"/>\n</scenario>\n";
}

}  // namespace

TEST_CASE("interrupted runs: children ended, temporary folders removed, exit 128 + signal",
          "[robustness][files][signals]") {
  for (const auto& c : signal_cases()) {
    INFO(c.what << " " << sig_name(c.sig) << (c.group ? " (group)" : ""));
    if (c.mpirun && std::string(VITSIM_PLAN_MPI).empty()) continue;
    vt::TempDir d;
    d.file("p.xml", platform());
    d.file("l.xml", long_scenario());
    const std::string tmp = d / "tmp";
    fs::create_directories(tmp);
    std::vector<std::string> args{c.program};
    std::istringstream words(c.args);
    for (std::string w; words >> w;) args.push_back(w);
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      setpgid(0, 0);  // its own group: a group signal reaches it and its children, not this test
      if (chdir(d.path.c_str()) != 0) _exit(120);
      setenv("TMPDIR", tmp.c_str(), 1);
      const int out = open((d / "out.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = open((d / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(121);
    }
    setpgid(pid, pid);
    // Wait until the run has its temporary folder and a child running.
    std::vector<pid_t> kids;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
      kids = children_of(pid);
      if (!kids.empty() && has_entry_starting(tmp, c.temp)) break;
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid)
        FAIL("the run ended before it could be interrupted: " << slurp(d / "err.txt"));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(!kids.empty());
    REQUIRE(has_entry_starting(tmp, c.temp));
    // Under mpirun: the ranks, their `vitsim plan` children and those children's simulations.
    std::vector<pid_t> grandkids;
    for (pid_t k : kids)
      for (pid_t g : children_of(k)) {
        grandkids.push_back(g);
        for (pid_t gg : children_of(g)) grandkids.push_back(gg);
      }
    if (c.mpirun)  // to the ranks: mpirun's own SIGTERM handling SIGKILLs them after 1 s, whatever they do
      for (pid_t k : kids) kill(k, c.sig);
    else
      REQUIRE(kill(c.group ? -pid : pid, c.sig) == 0);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    pid_t w = 0;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (w == 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("still running 60 s after the signal");
    }
    // Every child and grandchild ends (after SIGKILL, through PR_SET_PDEATHSIG).
    auto all_gone = [&] {
      for (pid_t k : kids)
        if (alive(k)) return false;
      for (pid_t g : grandkids)
        if (alive(g)) return false;
      return true;
    };
    for (int i = 0; i < 500 && !all_gone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(all_gone());
    if (c.sig == SIGKILL) {
      CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
      continue;  // nothing can clean up after SIGKILL: the folder stays (d removes it)
    }
    CHECK(entries_starting(tmp, "vitsim-") == 0);  // (OpenMPI keeps its own session folder there)
    if (c.mpirun) {
      CHECK(slurp(d / "err.txt").find("vitsim-plan-mpi: interrupted by " + std::string(sig_name(c.sig))) !=
            std::string::npos);
      continue;
    }
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + c.sig);
    std::string err = slurp(d / "err.txt");
    while (!err.empty() && err.back() == '\n') err.pop_back();
    const std::string last = err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1);
    CHECK(last.rfind(std::string("vitsim: interrupted by ") + sig_name(c.sig), 0) == 0);
  }
}

namespace {

std::vector<SignalCase> signal_cases() {
  const std::string sweep = "predict l.xml -q -j 2";
  return {
      {"a sweep (`predict`, 48 points, 2 at a time)", sweep, SIGINT, false, "vitsim-"},
      {"a sweep (`predict`, 48 points, 2 at a time)", sweep, SIGINT, true, "vitsim-"},
      {"a sweep (`predict`, 48 points, 2 at a time)", sweep, SIGTERM, false, "vitsim-"},
      {"a sweep (`predict`, 48 points, 2 at a time)", sweep, SIGHUP, false, "vitsim-"},
      {"a sweep (`predict`, 48 points, 2 at a time)", sweep, SIGKILL, false, "vitsim-"},
      {"a what-if run (`predict --what-if nodes:add=2`)", sweep + " --what-if nodes:add=2", SIGINT, false,
       "vitsim-whatif-"},
      {"a what-if run (`predict --what-if nodes:add=2`)", sweep + " --what-if nodes:add=2", SIGTERM, false,
       "vitsim-whatif-"},
      {"a plan (`plan`)", "plan l.xml -q -j 2", SIGINT, true, "vitsim-plan-"},
      {"a plan (`plan`)", "plan l.xml -q -j 2", SIGTERM, false, "vitsim-plan-"},
      {"a plan with what-ifs (`plan --what-if`)", "plan l.xml -q -j 2 --what-if link:n*-nic:bandwidth=2GBps",
       SIGTERM, false, "vitsim-whatif-"},
      // Each rank ends its `vitsim plan`, which ends its simulations; mpirun then ends the job.
      {"a distributed plan (`mpirun -np 2 vitsim-plan-mpi`)",
       "--allow-run-as-root --oversubscribe -np 2 " VITSIM_PLAN_MPI " l.xml -q -j 1", SIGTERM, false,
       "vitsim-plan-", "mpirun", true},
  };
}

std::vector<FileCase> file_cases() {
  const std::string P = "vitsim predict s.xml -q";
  const std::string ok_target = "test -L l.json && grep -q schema t.json";
  return {
      // --- outputs: what the one writer does with each kind of path ---
      {"outputs", "--out onto a symbolic link: its target written, the link stays", "ln -s t.json l.json",
       P + " --format json --out l.json", 0, "", ok_target},
      {"outputs", "--out onto a link to a link", "ln -s t.json m.json && ln -s m.json l.json",
       P + " --format json --out l.json", 0, "", ok_target + " && test -L m.json"},
      {"outputs", "--out onto a link into another folder",
       "mkdir sub && echo old > sub/t.json && ln -s sub/t.json l.json", P + " --format json --out l.json", 0,
       "", "test -L l.json && grep -q schema sub/t.json"},
      {"outputs", "--trace onto a symbolic link", "ln -s t.json l.json", P + " --trace l.json --out r.txt", 0,
       "", "test -L l.json && grep -q traceEvents t.json"},
      {"outputs", "--out onto a FIFO: written through to its reader",
       "mkfifo fifo && (cat fifo > got 2> cat.err &)", P + " --format csv --out fifo", 0, "",
       "sleep 1; test -p fifo && grep -q ^nodes, got"},
      {"outputs", "--out onto a character device (null)", "mknod null c 1 3", P + " --out null", 0, "",
       "test -c null"},
      {"outputs", "--out onto a full device", "mknod full c 1 7", P + " --out full", 1,
       "vitsim: error: cannot write full: No space left on device", "test -c full"},
      {"outputs", "--out standard output through /proc/self/fd/1 (what /dev/stdout links to)", "",
       P + " --format csv --out /proc/self/fd/1 | head -c 6", 0, "nodes,", "", true},
      {"outputs", "--out onto a folder", "mkdir d", P + " --out d", 1,
       "vitsim: error: cannot write d: Is a directory", "test -d d"},
      {"outputs", "--out onto a socket",
       "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"", P + " --out sock", 1,
       "vitsim: error: cannot write sock: it is a socket; vitsim writes regular files, FIFOs and character "
       "devices",
       "test -S sock"},
      {"outputs", "--out onto a link loop", "ln -s b a && ln -s a b", P + " --out a", 1,
       "vitsim: error: cannot write a: Too many levels of symbolic links"},
      {"outputs", "--out through a file (checked before simulating)", "", P + " --out s.xml/r.json", 1,
       "vitsim: error: cannot write s.xml/r.json: Not a directory"},
      {"outputs", "plan --out onto a link", "ln -s t.json l.json",
       "vitsim plan s.xml -q --format json --out l.json", 0, "", ok_target},
      {"outputs", "plot --out onto a folder", std::string("vitsim ") + kReportArgs + " && mkdir d",
       "vitsim plot r.json --out d", 1, "vitsim: error: cannot write d: Is a directory"},
      {"outputs", "validate --out onto a folder (before predicting)",
       std::string("vitsim ") + kReportArgs + " && mkdir d",
       "vitsim validate s.xml -q --measured r.json --out d", 1,
       "vitsim: error: cannot write d: Is a directory"},
      // --- outputs that are inputs, or each other ---
      {"output = input", "--out is the scenario", "cp s.xml s.orig", P + " --out s.xml", 1,
       "vitsim: error: --out 's.xml' is the scenario 's.xml': an output must not overwrite an input",
       "cmp s.xml s.orig"},
      {"output = input", "--out is the scenario under another name", "mkdir sub", P + " --out sub/../s.xml",
       1,
       "vitsim: error: --out 'sub/../s.xml' is the scenario 's.xml': an output must not overwrite an input"},
      {"output = input", "--out is a link to the scenario", "ln -s s.xml l.xml", P + " --out l.xml", 1,
       "vitsim: error: --out 'l.xml' is the scenario 's.xml': an output must not overwrite an input"},
      {"output = input", "--out is a hard link to the scenario", "ln s.xml h.xml", P + " --out h.xml", 1,
       "vitsim: error: --out 'h.xml' is the scenario 's.xml': an output must not overwrite an input"},
      {"output = input", "--trace is the platform", "cp p.xml p.orig", P + " --trace p.xml", 1,
       "vitsim: error: --trace 'p.xml' is the platform 'p.xml': an output must not overwrite an input",
       "cmp p.xml p.orig"},
      {"output = input", "--out is a platform given with --set", "cp p.xml q.xml",
       P + " --set cluster.platform=q.xml --out q.xml", 1,
       "vitsim: error: --out 'q.xml' is the platform 'q.xml': an output must not overwrite an input"},
      {"output = input", "--out is the DeepSpeed config",
       "echo '{}' > ds.json && sed -i 's|</scenario>|<deepspeed config=\"ds.json\"/></scenario>|' s.xml",
       P + " --out ds.json", 1,
       "vitsim: error: --out 'ds.json' is the DeepSpeed config 'ds.json': an output must not overwrite an "
       "input"},
      {"output = input", "--out is the calibration", "echo '{}' > c.json",
       P + " --calibration c.json --out c.json", 1,
       "vitsim: error: --out 'c.json' is --calibration 'c.json': an output must not overwrite an input"},
      {"output = input", "--out is a what-if's GPU spec", "echo '{}' > spec.json",
       P + " --what-if gpu:n0=spec.json:T4 --out spec.json", 1,
       "vitsim: error: --out 'spec.json' is the what-if spec 'spec.json': an output must not overwrite an "
       "input"},
      {"output = input", "--out and --trace the same file", "", P + " --out x.json --trace x.json", 1,
       "vitsim: error: --out 'x.json' and --trace 'x.json' are the same file: one output would overwrite the "
       "other"},
      {"output = input", "--out and --trace the same file, named differently", "mkdir sub",
       P + " --out x.json --trace sub/../x.json", 1,
       "vitsim: error: --out 'x.json' and --trace 'sub/../x.json' are the same file: one output would "
       "overwrite the other"},
      {"output = input", "plan --out is the scenario", "", "vitsim plan s.xml -q --out s.xml", 1,
       "vitsim: error: --out 's.xml' is the scenario 's.xml': an output must not overwrite an input"},
      {"output = input", "plan --merge: --out is a shard",
       "vitsim plan s.xml -q --shard 0/1 --format json --out a.json",
       "vitsim plan --merge a.json --out a.json", 1,
       "vitsim: error: --out 'a.json' is --merge shard 'a.json': an output must not overwrite an input"},
      {"output = input", "plot --out is the report", std::string("vitsim ") + kReportArgs,
       "vitsim plot r.json --out r.json", 1,
       "vitsim: error: --out 'r.json' is the report 'r.json': an output must not overwrite an input"},
      {"output = input", "validate --out is the measured report", std::string("vitsim ") + kReportArgs,
       "vitsim validate s.xml -q --measured r.json --out r.json", 1,
       "vitsim: error: --out 'r.json' is --measured 'r.json': an output must not overwrite an input"},
      // --- inputs that are not regular files, or too large ---
      {"inputs", "scenario: a device that never ends (zero)", "mknod zero c 1 5", "vitsim predict zero -q", 1,
       "vitsim: error: zero: scenario file is a character device, not a regular file"},
      {"inputs", "scenario: a FIFO nobody writes (does not block)", "mkfifo fifo", "vitsim predict fifo -q",
       1, "vitsim: error: fifo: scenario file is a FIFO, not a regular file"},
      {"inputs", "scenario: a folder", "mkdir d", "vitsim predict d -q", 1,
       "vitsim: error: d: scenario file is a directory, not a regular file"},
      {"inputs", "scenario: a link loop", "ln -s b a && ln -s a b", "vitsim predict a -q", 1,
       "vitsim: error: a: cannot open scenario file: Too many levels of symbolic links"},
      {"inputs", "scenario: a path through a file", "", "vitsim predict s.xml/x -q", 1,
       "vitsim: error: s.xml/x: cannot open scenario file: Not a directory"},
      {"inputs", "scenario: 65 MiB (sparse)", "truncate -s 65M big.xml", "vitsim predict big.xml -q", 1,
       "vitsim: error: big.xml: scenario file is 65.00 MiB, above the 64.00 MiB limit for an input "
       "(VITSIM_MAX_INPUT_SIZE "
       "raises it, e.g. VITSIM_MAX_INPUT_SIZE=1GiB)"},
      {"inputs", "scenario above a lowered limit", "", "VITSIM_MAX_INPUT_SIZE=100B vitsim predict s.xml -q",
       1,
       "vitsim: error: s.xml: scenario file is 206 B, above the 100 B limit for an input "
       "(VITSIM_MAX_INPUT_SIZE raises "
       "it, e.g. VITSIM_MAX_INPUT_SIZE=1GiB)"},
      {"inputs", "a limit that is not a size", "", "VITSIM_MAX_INPUT_SIZE=lots vitsim predict s.xml -q", 1,
       "vitsim: error: VITSIM_MAX_INPUT_SIZE: bad size 'lots'", "", true},
      {"inputs", "platform: a device (zero)", "mknod zero c 1 5", P + " --set cluster.platform=zero", 1,
       "vitsim: error: zero: platform file is a character device, not a regular file"},
      {"inputs", "platform: a FIFO", "mkfifo fifo", P + " --set cluster.platform=fifo", 1,
       "vitsim: error: fifo: platform file is a FIFO, not a regular file"},
      {"inputs", "platform: a folder", "mkdir d", P + " --set cluster.platform=d", 1,
       "vitsim: error: d: platform file is a directory, not a regular file"},
      {"inputs", "calibration: a FIFO", "mkfifo fifo", P + " --calibration fifo", 1,
       "vitsim: error: fifo: calibration file is a FIFO, not a regular file"},
      {"inputs", "calibration: a device (zero)", "mknod zero c 1 5", P + " --calibration zero", 1,
       "vitsim: error: zero: calibration file is a character device, not a regular file"},
      {"inputs", "DeepSpeed config: a folder",
       "mkdir ds && sed -i 's|</scenario>|<deepspeed config=\"ds\"/></scenario>|' s.xml", P, 1,
       "vitsim: error: s.xml:7: ds: DeepSpeed config is a directory, not a regular file"},
      {"inputs", "DeepSpeed config: a FIFO",
       "mkfifo ds && sed -i 's|</scenario>|<deepspeed config=\"ds\"/></scenario>|' s.xml", P, 1,
       "vitsim: error: s.xml:7: ds: DeepSpeed config is a FIFO, not a regular file"},
      {"inputs", "what-if GPU spec: a FIFO", "mkfifo spec.json", P + " --what-if gpu:n0=spec.json:T4", 1,
       "vitsim: error: --what-if: what-if 'gpu:n0=spec.json:T4': spec.json: GPU type spec is a FIFO, not a "
       "regular file"},
      {"inputs", "plot: a report that is a FIFO", "mkfifo fifo", "vitsim plot fifo --out x.svg", 1,
       "vitsim: error: fifo: report is a FIFO, not a regular file"},
      {"inputs", "validate: a measured report that is a device", "mknod zero c 1 5",
       "vitsim validate s.xml -q --measured zero", 1,
       "vitsim: error: zero: measured report is a character device, not a regular file"},
      {"inputs", "plan --merge: a shard that is a folder", "mkdir d", "vitsim plan --merge d", 1,
       "vitsim: error: d: plan shard is a directory, not a regular file"},
      {"inputs", "plan --merge: an option that shapes the plan",
       "vitsim plan s.xml -q --shard 0/1 --format json --out a.json",
       "vitsim plan --merge a.json --price-per-kwh 0.3", 2,
       "vitsim: error: --price-per-kwh shapes the plan: give it to each `vitsim plan --shard` command; "
       "--merge ranks the shards "
       "as they were planned"},
      // --- standard output ---
      {"stdout", "the table onto a full device", "mknod full c 1 7", P + " > full", 1,
       "vitsim: error: writing standard output: No space left on device"},
      {"stdout", "JSON onto a full device", "mknod full c 1 7", P + " --format json > full", 1,
       "vitsim: error: writing standard output: No space left on device"},
      {"stdout", "a plan onto a full device", "mknod full c 1 7", "vitsim plan s.xml -q > full", 1,
       "vitsim: error: writing standard output: No space left on device"},
      {"stdout", "--version onto a full device", "mknod full c 1 7", "vitsim --version > full", 1,
       "vitsim: error: writing standard output: No space left on device"},
      {"stdout", "standard output closed", "", P + " >&-", 1,
       "vitsim: error: writing standard output: Bad file descriptor"},
      // Issue 27: fmt::print threw once the text outgrew stdio's buffer (a plan's JSON), exit 3 "internal
      // error".
      {"stdout", "a plan's JSON onto a closed standard output", "", "vitsim plan s.xml -q --format json >&-",
       1, "vitsim: error: writing standard output: Bad file descriptor"},
      // Issue 27: a full file system, not a device: a 4 KiB tmpfs the command mounts in a mount namespace of
      // its own (unshare -rm: gone with it, nothing to unmount), smaller than a plan's JSON (~9 KiB).
      {"stdout", "a plan's JSON onto a full file system", "mkdir small",
       "unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs small && vitsim plan s.xml -q --format json > "
       "small/plan.json'",
       1, "vitsim: error: writing standard output: No space left on device", "test -z \"$(ls small)\""},
      {"outputs", "--out onto a full file system", "mkdir small",
       "unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs small && vitsim plan s.xml -q --format json --out "
       "small/plan.json'",
       1, "vitsim: error: cannot write small/plan.json: No space left on device", ""},
      {"stdout", "a failing command keeps its status", "mknod full c 1 7",
       "vitsim predict none.xml -q > full", 1, "vitsim: error: none.xml: cannot open scenario file"},
      // --- command-line messages ---
      {"messages", "a number too large for an option", "",
       P + " --jobs 99999999999999999999999999999999999999999999999999", 2,
       "vitsim: error: --jobs: 9999999999999999999999999999999999999999... (50 characters) is out of range "
       "(expected 1 .. "
       "4096)"},
      {"messages", "an option out of range", "", P + " --jobs 0", 2,
       "vitsim: error: --jobs: 0 is out of range (expected 1 .. 4096)"},
      {"messages", "an unknown option", "", P + " --jbos 2", 2,
       "vitsim: error: vitsim predict: unknown option '--jbos' (did you mean '--jobs'?) (vitsim predict "
       "--help lists them)"},
  };
}

}  // namespace
