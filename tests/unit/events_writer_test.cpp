// EventsWriter (--events): a reader that stops reading never blocks the
// writer; what could not wait is dropped and counted; a write error is
// still the first thing reported.
#include "output/events_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace looptrace {
namespace {

class EventsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/looptrace-events-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::unique_ptr<OutputFile> create(const std::string& p) {
    auto f = OutputFile::Create("--events", p);
    EXPECT_TRUE(f.ok()) << f.status().message();
    return f.ok() ? std::move(*f) : nullptr;
  }

  std::string dir_;
};

using Clock = std::chrono::steady_clock;

std::string line(int i) {
  return "{\"event\": \"hang\", \"i\": " + std::to_string(i) + ", \"pad\": \"" +
         std::string(200, 'x') + "\"}";
}

TEST_F(EventsWriterTest, EveryLineReachesAFile) {
  EventsWriter w(create(path("ev.jsonl")));
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(w.write(line(i)));
  ASSERT_TRUE(w.close().ok());
  EXPECT_EQ(w.dropped(), 0u);
  std::ifstream in(path("ev.jsonl"));
  std::string got;
  int n = 0;
  while (std::getline(in, got)) EXPECT_EQ(got, line(n++));
  EXPECT_EQ(n, 1000);
}

// A FIFO whose reader holds it open and never reads: writes return at once,
// the lines past the queue and the pipe are dropped and counted, and close
// gives up after its grace period. Everything the reader then finds is
// whole lines in order, and what it finds plus what was dropped is what
// was written.
TEST_F(EventsWriterTest, StalledReaderNeverBlocksAndDropsAreCounted) {
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  int rd = open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  ASSERT_GT(fcntl(rd, F_SETPIPE_SZ, 4096), 0);
  const size_t queue = 16 * 1024;
  EventsWriter w(create(path("fifo")), queue);
  const auto t0 = Clock::now();
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) accepted += w.write(line(i));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1)) << "never blocks";
  EXPECT_LT(accepted, 2000);
  const auto t1 = Clock::now();
  Status st = w.close(300);
  EXPECT_LT(Clock::now() - t1, std::chrono::seconds(3)) << "gives up";
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 1);
  EXPECT_EQ(st.message().rfind("--events " + path("fifo") + ": ", 0), 0u)
      << st.message();
  EXPECT_NE(st.message().find(" of 2000 lines dropped"), std::string::npos)
      << st.message();
  // What the reader finds now.
  std::string got;
  char buf[65536];
  ssize_t n;
  while ((n = read(rd, buf, sizeof buf)) > 0) got.append(buf, n);
  close(rd);
  std::istringstream in(got);
  std::string l;
  uint64_t whole = 0;
  while (std::getline(in, l))
    if (in.eof()) {
      break;  // a line cut by giving up
    } else {
      EXPECT_EQ(l, line(static_cast<int>(whole))) << "in order, intact";
      ++whole;
    }
  EXPECT_GT(whole, 0u);
  const bool cut = !got.empty() && got.back() != '\n';
  EXPECT_EQ(whole + w.dropped(), 2000u) << (cut ? "one line cut" : "");
  EXPECT_LE(whole * (line(0).size() + 1), 4096u + line(0).size());
}

TEST_F(EventsWriterTest, WriteErrorIsReportedNotDrops) {
  EventsWriter w(create("/dev/full"));
  w.write(line(0));
  w.write(line(1));
  Status st = w.close();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "--events: writing /dev/full: No space left on device");
}

TEST_F(EventsWriterTest, AbandonedFileIsRemoved) {
  {
    EventsWriter w(create(path("ev.jsonl")));
    w.write(line(0));
  }
  EXPECT_FALSE(std::filesystem::exists(path("ev.jsonl")));
}

}  // namespace
}  // namespace looptrace
