// lt_bench_pyframes: how fast userspace names Python frames (PyFrames::merge,
// python/frames.h), the work looptrace does per sample of a CPython process
// (docs/benchmarks.md, "Python frames"; scripts/bench-python.sh runs it).
//
//   lt_bench_pyframes PID FRAMES_FILE [--rounds R]
//
// PID: a live /usr/bin/python3; FRAMES_FILE: lines "CODE_ADDR LASTI" (each
// a code object of PID, id(code), and a byte offset of an instruction in
// it, f_lasti), innermost first, cut into stacks of 64 (LT_MAX_PYFRAMES)
// frames. Each stack gets 30 native frames, none in the eval loop, for
// merge() to interleave with.
//
// cold: the first merge of every stack: each code object read from PID's
// memory (process_vm_readv) and its line found once.
// warm: R rounds over the same stacks: every code object cached (what a
// long run's samples mostly see).
//
// Prints "key value" lines. Exit 0; 1 when PID runs no CPython looptrace
// reads, or a frame was not named; 2 on bad arguments.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "proc/maps.h"
#include "python/frames.h"
#include "python/interpreter.h"

using namespace looptrace;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

Stack make_stack(const std::vector<lt_pyframe>& py) {
  Stack st;
  for (uint64_t i = 0; i < 30; ++i) st.frames.push_back(0x1000 + 16 * i);
  auto p = std::make_shared<PyStack>();
  p->frames = py;
  st.py = std::move(p);
  return st;
}

// Each stack's frames named, or false.
bool merge_all(python::PyFrames& py, uint32_t pid,
               const std::vector<std::vector<lt_pyframe>>& stacks,
               size_t* named) {
  for (const auto& s : stacks) {
    Stack st = make_stack(s);
    py.merge(pid, &st);
    if (st.frames.size() != 30 + s.size()) return false;
    *named += s.size();
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--rounds")) {
    std::fprintf(stderr,
                 "usage: lt_bench_pyframes PID FRAMES_FILE [--rounds R]\n");
    return 2;
  }
  const auto pid = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  const int rounds = argc == 5 ? std::atoi(argv[4]) : 200;
  auto maps = proc::read_maps(pid);
  if (!maps.ok() || rounds <= 0) {
    std::fprintf(stderr, "lt_bench_pyframes: bad pid or rounds\n");
    return 2;
  }
  auto in = python::find_interpreter(pid, *maps);
  if (!in.ok() || !*in) {
    std::fprintf(stderr, "lt_bench_pyframes: pid %u runs no CPython known\n",
                 pid);
    return 1;
  }
  const uint64_t adaptive = (*in)->layout->code.co_code_adaptive;
  std::vector<std::vector<lt_pyframe>> stacks(1);
  std::ifstream f(argv[2]);
  uint64_t code = 0, lasti = 0;
  while (f >> code >> lasti) {
    if (stacks.back().size() == LT_MAX_PYFRAMES) stacks.emplace_back();
    stacks.back().push_back({code, code + adaptive + lasti});
  }
  python::PyFrames py;
  if (stacks[0].empty() || !py.attach(pid, *maps)) {
    std::fprintf(stderr, "lt_bench_pyframes: no frames, or attach failed\n");
    return 1;
  }
  size_t cold = 0, warm = 0;
  auto t0 = std::chrono::steady_clock::now();
  bool ok = merge_all(py, pid, stacks, &cold);
  const double cold_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int r = 0; ok && r < rounds; ++r) ok = merge_all(py, pid, stacks, &warm);
  const double warm_s = seconds_since(t0);
  // Every frame named from its code object (none "(unknown)").
  size_t unknown = 0;
  for (const auto& s : stacks) {
    Stack st = make_stack(s);
    py.merge(pid, &st);
    for (uint64_t a : st.frames)
      if (python::is_py_frame(a) && py.frame(a).function == "(unknown)")
        ++unknown;
  }
  std::printf("stacks %zu\nframes_per_stack %zu\n", stacks.size(),
              stacks[0].size());
  std::printf("cold_frames %zu\ncold_s %.6f\ncold_frames_per_s %.0f\n", cold,
              cold_s, cold / cold_s);
  std::printf("warm_frames %zu\nwarm_s %.6f\nwarm_frames_per_s %.0f\n", warm,
              warm_s, warm / warm_s);
  std::printf("unknown_frames %zu\n", unknown);
  return ok && unknown == 0 ? 0 : 1;
}
