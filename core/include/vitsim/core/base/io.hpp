#pragma once
// Every file vitsim reads from the user and every file it writes goes through here (docs/errors.md:
// what vitsim accepts as inputs and outputs, and what Ctrl-C does).
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vitsim {

// --- outputs ---
// The one writer of outputs. What `path` is decides how it is written:
//  - a regular file, or a new name: the content goes to "<path>.tmp.<pid>", is synced, then renamed
//    over `path`, so a reader never sees half a file and a failed write (a full disk) leaves the
//    previous file intact and no temporary behind; a replaced file keeps its permissions;
//  - a symbolic link (also one to a name that does not exist yet): its target is written that way, the
//    link stays;
//  - a FIFO or a character device (/dev/stdout, /dev/null, a terminal): written through, opened for
//    writing without creating, truncating or renaming anything;
//  - a directory, socket or block device: refused.
// Throws Error("cannot write PATH: reason").
void write_file_atomic(const std::string& path, const std::string& content);
// The same for content produced piece by piece: `produce` calls its argument with each chunk. After the
// first failed write the rest are dropped and the error is thrown once `produce` returns; an exception
// from `produce` removes the temporary and propagates.
using ChunkSink = std::function<void(const void* data, size_t size)>;
void write_file_atomic(const std::string& path, const std::function<void(const ChunkSink&)>& produce);
// write(2) all of `n` bytes at `p` to `fd` (again after EINTR); false with errno set on failure.
bool write_all(int fd, const char* p, size_t n);
// Fails early, before hours of work, when `path` could not be written later: its folder is missing or
// not writable, or it is something write_file_atomic refuses. Throws the Error write_file_atomic would.
void check_writable(const std::string& path);

// A file a command names, and the part it plays there: {"r.json", "--out"}, {"s.xml", "the scenario"}.
struct NamedPath {
  std::string path;
  std::string role;
};
// Run by every command before any work: each output must be writable (check_writable), must not be one
// of the inputs, and two outputs must not be the same file (writing through a FIFO or a device twice
// loses nothing and is allowed). Files are compared by identity (device and inode when the file exists,
// the path with its symbolic links resolved when it does not), so "./s.xml", "dir/../s.xml" and a link
// to s.xml are all s.xml. Empty paths are skipped. Throws Error naming both roles.
void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// --- inputs ---
// The largest input read_input_file accepts unless told otherwise: 64 MiB, far above any scenario,
// platform, calibration or report vitsim writes (the largest shipped file is under 1 MiB), and low
// enough that a mistaken /dev/zero or a huge file ends at once. VITSIM_MAX_INPUT_SIZE (a size with
// its unit, e.g. 512MiB) raises or lowers it.
constexpr size_t kDefaultInputLimit = size_t{64} << 20;
size_t input_size_limit();  // kDefaultInputLimit or VITSIM_MAX_INPUT_SIZE; throws Error on a bad value
// The one reader of the user's files. Opens without blocking (a FIFO with no writer does not hang),
// refuses what is not a regular file (directory, FIFO, device, socket) and a file larger than `limit`,
// then reads it. `role` names the file in the messages: "PATH: cannot open scenario file",
// "PATH: scenario file is a FIFO, not a regular file", "PATH: scenario file is 80.0 MiB, above the
// 64.0 MiB limit for an input (VITSIM_MAX_INPUT_SIZE raises it)". limit 0: input_size_limit().
std::string read_input_file(const std::string& path, const std::string& role, size_t limit = 0);
// A file vitsim wrote itself (a child's result, gnuplot's SVG): regular files only, no size limit.
std::string read_file(const std::string& path);

// Run first in main: a standard descriptor (0, 1, 2) that was closed (`vitsim ... >&-`) is taken by
// /dev/null opened read-only, so that no file vitsim opens later becomes its "standard output" and
// writing to it still fails (EBADF), as it would have.
void reserve_standard_fds();

// --- temporary folders and interruptions ---
// A private temporary folder ("<tmp>/<prefix>XXXXXX"), removed with everything in it when destroyed, or
// when the process is interrupted (install_interrupt_cleanup): every TempDir is in one registry.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "vitsim-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Installs the handlers of SIGINT, SIGTERM and SIGHUP. On a signal the handler (async-signal-safe work
// only) records it and sends SIGTERM to every registered child; a watcher thread then waits for the
// children (SIGKILL after 5 s), removes every registered TempDir and output temporary, prints
// "PROGRAM: interrupted by SIGINT: ..." on stderr and exits with status 128 + the signal.
void install_interrupt_cleanup(const char* program = "vitsim");
// What the interruption line adds after "interrupted by SIGINT" (the watcher asks, not the signal handler,
// holding the registry: the note reads atomics only): `vitsim train` says at which step it stopped and
// what was saved. std::nullopt: no line at all (a rank other than 0, whose rank 0 says it).
void set_interrupt_note(std::function<std::optional<std::string>()> note);
// The signal that interrupted the process (0: none). A thread that sees it non-zero must not report
// errors of its own: the watcher is ending the process (stop_if_interrupted).
int interrupted();
// When interrupted, waits for the watcher to end the process; else returns at once.
void stop_if_interrupted();
// Children to end on an interruption (run_forked's simulations, a spawned vitsim).
void register_child(pid_t pid);
void unregister_child(pid_t pid);
// Called first in a forked child: default signal handlers (so that it dies of the signals its parent
// sends) and death with its parent (PR_SET_PDEATHSIG SIGKILL; exits at once when the parent is gone).
void child_after_fork(pid_t parent);

}  // namespace vitsim
