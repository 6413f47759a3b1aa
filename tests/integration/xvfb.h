// An X display of a test's own: Xvfb under its TempDir.
#pragma once

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"

namespace lt_test {

// A display of its own: Xvfb picks a free number and writes it.
class Display {
 public:
  // `env`: VAR=VALUE settings for Xvfb (an LD_PRELOAD).
  explicit Display(const TempDir& dir, std::vector<std::string> env = {})
      : out_(dir.file("xvfb.out")),
        xvfb_(xvfb_argv(std::move(env)), out_, dir.file("xvfb.err")) {
    for (int i = 0; i < 500 && name_.empty(); ++i) {
      std::string n = read_file(out_);
      if (n.find('\n') != std::string::npos)
        name_ = ":" + n.substr(0, n.find('\n'));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // SIGTERM, not the harness's SIGKILL: Xvfb removes its lock file and
  // socket in /tmp.
  ~Display() {
    xvfb_.signal(SIGTERM);
    xvfb_.wait(5000);
  }
  const std::string& name() const { return name_; }
  // argv run with DISPLAY set to this display.
  std::vector<std::string> env(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"/usr/bin/env", "DISPLAY=" + name_});
    return argv;
  }

 private:
  static std::vector<std::string> xvfb_argv(std::vector<std::string> env) {
    std::vector<std::string> argv = {
        "/usr/bin/Xvfb", "-displayfd", "1", "-nolisten",
        "tcp",           "-screen",    "0", "640x480x24"};
    if (!env.empty()) {
      env.insert(env.begin(), "/usr/bin/env");
      argv.insert(argv.begin(), env.begin(), env.end());
    }
    return argv;
  }
  std::string out_;
  Process xvfb_;
  std::string name_;
};

}  // namespace lt_test
