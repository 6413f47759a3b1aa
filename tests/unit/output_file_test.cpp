// OutputFile: created 0600 without following links or truncating what is
// there, write errors reported at close, abandoned files cleaned up.
#include "base/output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace looptrace {
namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/looptrace-output-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static void write(const std::string& p, const std::string& text) {
    std::ofstream(p) << text;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static mode_t mode(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }

  std::string dir_;
};

TEST_F(OutputFileTest, NewFileIsPrivateAndHoldsWhatWasWritten) {
  // Even a permissive umask leaves a report unreadable to others: it holds
  // command lines and addresses.
  mode_t old_umask = umask(0);
  auto f = OutputFile::Create("--json", path("r.json"));
  umask(old_umask);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->kind(), OutputKind::kCreated);
  (*f)->stream() << "{\"a\": 1}\n";
  EXPECT_TRUE((*f)->close().ok());
  EXPECT_EQ(read(path("r.json")), "{\"a\": 1}\n");
  EXPECT_EQ(mode(path("r.json")), 0600u);
}

TEST_F(OutputFileTest, SymlinkIsRefusedAndItsTargetUntouched) {
  std::string target = path("victim");
  write(target, "secret\n");
  chmod(target.c_str(), 0600);
  ASSERT_EQ(symlink(target.c_str(), path("link").c_str()), 0);
  auto f = OutputFile::Create("--json", path("link"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().exit_code(), 2);
  EXPECT_NE(f.status().message().find("symbolic link"), std::string::npos)
      << f.status().message();
  EXPECT_EQ(read(target), "secret\n");
  EXPECT_EQ(mode(target), 0600u);
  // The link itself is left where it was.
  EXPECT_TRUE(std::filesystem::is_symlink(path("link")));
  // A dangling link (one that would create its target) too.
  ASSERT_EQ(symlink(path("nothing").c_str(), path("dangling").c_str()), 0);
  EXPECT_FALSE(OutputFile::Create("--events", path("dangling")).ok());
  EXPECT_FALSE(std::filesystem::exists(path("nothing")));
}

TEST_F(OutputFileTest, ExistingFileIsMovedAsideNotTruncated) {
  write(path("r.json"), "previous report\n");
  write(path("r.json.old"), "older report\n");
  auto f = OutputFile::Create("--json", path("r.json"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->kind(), OutputKind::kReplaced);
  (*f)->stream() << "new";
  ASSERT_TRUE((*f)->close().ok());
  EXPECT_EQ(read(path("r.json")), "new");
  EXPECT_EQ(read(path("r.json.old")), "previous report\n");
  EXPECT_EQ(mode(path("r.json")), 0600u);
}

TEST_F(OutputFileTest, HardLinkedInodeIsNotWritten) {
  // A hard link to someone's file planted under the report's name: the
  // file's inode must not be written through it.
  write(path("victim"), "secret\n");
  ASSERT_EQ(link(path("victim").c_str(), path("r.json").c_str()), 0);
  auto f = OutputFile::Create("--json", path("r.json"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  (*f)->stream() << "report";
  ASSERT_TRUE((*f)->close().ok());
  EXPECT_EQ(read(path("victim")), "secret\n");
}

TEST_F(OutputFileTest, AnotherUsersFileIsNotReplaced) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a file";
  write(path("r.json"), "theirs\n");
  ASSERT_EQ(chown(path("r.json").c_str(), 65534, 65534), 0);
  auto f = OutputFile::Create("--json", path("r.json"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("belongs to uid 65534"),
            std::string::npos)
      << f.status().message();
  EXPECT_EQ(read(path("r.json")), "theirs\n");
  EXPECT_FALSE(std::filesystem::exists(path("r.json.old")));
  // Nor an .old of theirs that moving aside would replace.
  write(path("mine.json"), "mine\n");
  write(path("mine.json.old"), "theirs\n");
  ASSERT_EQ(chown(path("mine.json.old").c_str(), 65534, 65534), 0);
  EXPECT_FALSE(OutputFile::Create("--json", path("mine.json")).ok());
  EXPECT_EQ(read(path("mine.json")), "mine\n");
  EXPECT_EQ(read(path("mine.json.old")), "theirs\n");
}

// /tmp/x/link -> /tmp/victim, the link owned by another user: a report
// through it would land (and move root's file aside) where that user
// chose. The kernel's protected_symlinks rule, in every directory.
TEST_F(OutputFileTest, AnotherUsersDirectoryLinkIsNotFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a link";
  ASSERT_EQ(mkdir(path("victim").c_str(), 0755), 0);
  write(path("victim/conf"), "root's conf\n");
  ASSERT_EQ(mkdir(path("x").c_str(), 0777), 0);
  ASSERT_EQ(chown(path("x").c_str(), 65534, 65534), 0);
  ASSERT_EQ(symlink(path("victim").c_str(), path("x/link").c_str()), 0);
  ASSERT_EQ(lchown(path("x/link").c_str(), 65534, 65534), 0);
  for (const std::string& p : {path("x/link/conf"), path("x/link/new"),
                               path("x/link/../victim/conf")}) {
    SCOPED_TRACE(p);
    auto f = OutputFile::Create("--json", p);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().exit_code(), 2);
    EXPECT_EQ(f.status().message(),
              "--json " + p + ": " + path("x/link") +
                  " is a symbolic link owned by uid 65534; not following it");
  }
  EXPECT_EQ(read(path("victim/conf")), "root's conf\n");
  EXPECT_FALSE(std::filesystem::exists(path("victim/conf.old")));
  EXPECT_FALSE(std::filesystem::exists(path("victim/new")));
  // Behind a link of ours to that link: still theirs on the way.
  ASSERT_EQ(symlink(path("x/link").c_str(), path("mine").c_str()), 0);
  EXPECT_FALSE(OutputFile::Create("--json", path("mine/conf")).ok());
  EXPECT_EQ(read(path("victim/conf")), "root's conf\n");
}

// A link the caller (or root) owns is followed, relative or absolute, and
// so is a relative path from the working directory.
TEST_F(OutputFileTest, OwnDirectoryLinksAreFollowed) {
  ASSERT_EQ(mkdir(path("real").c_str(), 0700), 0);
  ASSERT_EQ(symlink("real", path("rel").c_str()), 0);
  ASSERT_EQ(symlink(path("real").c_str(), path("abs").c_str()), 0);
  for (const char* name : {"rel/a.json", "abs/b.json", "rel/../abs/c.json"}) {
    SCOPED_TRACE(name);
    auto f = OutputFile::Create("--json", path(name));
    ASSERT_TRUE(f.ok()) << f.status().message();
    (*f)->stream() << name;
    ASSERT_TRUE((*f)->close().ok());
  }
  EXPECT_EQ(read(path("real/a.json")), "rel/a.json");
  EXPECT_EQ(read(path("real/b.json")), "abs/b.json");
  EXPECT_EQ(read(path("real/c.json")), "rel/../abs/c.json");
  // A loop of links is an error, not a hang.
  ASSERT_EQ(symlink("loop2", path("loop1").c_str()), 0);
  ASSERT_EQ(symlink("loop1", path("loop2").c_str()), 0);
  auto loop = OutputFile::Create("--json", path("loop1/r.json"));
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.status().message().find("Too many levels of symbolic links"),
            std::string::npos)
      << loop.status().message();
  // Relative to the working directory.
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  auto rel = OutputFile::Create("--json", "rel/d.json");
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(rel.ok()) << rel.status().message();
  ASSERT_TRUE((*rel)->close().ok());
  EXPECT_TRUE(std::filesystem::exists(path("real/d.json")));
}

TEST_F(OutputFileTest, BadPathsAreUsageErrors) {
  auto missing = OutputFile::Create("--json", path("no/such/dir/r.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().exit_code(), 2);
  EXPECT_NE(missing.status().message().find("No such file or directory"),
            std::string::npos)
      << missing.status().message();
  auto dir = OutputFile::Create("--json", dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);
  EXPECT_FALSE(OutputFile::Create("--json", "").ok());
}

TEST_F(OutputFileTest, WriteFailureIsReportedAtClose) {
  // /dev/full takes the open and fails every write with ENOSPC; a small
  // report sits in the buffer until close, which must still see it.
  auto f = OutputFile::Create("--json", "/dev/full");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->kind(), OutputKind::kExisting);
  (*f)->stream() << "{}\n";
  Status st = (*f)->close();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 1);
  EXPECT_EQ(st.message(), "--json: writing /dev/full: No space left on device");
  // A failure seen by flush() is the same one close() reports.
  auto g = OutputFile::Create("--events", "/dev/full");
  ASSERT_TRUE(g.ok());
  (*g)->stream() << "{\"event\": 1}\n";
  EXPECT_FALSE((*g)->flush());
  EXPECT_FALSE((*g)->close().ok());
}

TEST_F(OutputFileTest, LargeWritesGoThroughIntact) {
  auto f = OutputFile::Create("--json", path("big"));
  ASSERT_TRUE(f.ok());
  std::string chunk(100000, 'x');  // larger than the buffer
  for (int i = 0; i < 5; ++i) (*f)->stream() << chunk << i;
  ASSERT_TRUE((*f)->close().ok());
  std::string got = read(path("big"));
  ASSERT_EQ(got.size(), 5 * (chunk.size() + 1));
  EXPECT_EQ(got.substr(chunk.size(), 1), "0");
  EXPECT_EQ(got.back(), '4');
}

TEST_F(OutputFileTest, AbandonedFileIsRemovedAndTheOldOnePutBack) {
  {
    auto f = OutputFile::Create("--json", path("new.json"));
    ASSERT_TRUE(f.ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path("new.json")));
  write(path("r.json"), "previous\n");
  {
    auto f = OutputFile::Create("--json", path("r.json"));
    ASSERT_TRUE(f.ok());
    EXPECT_TRUE(std::filesystem::exists(path("r.json.old")));
  }
  EXPECT_EQ(read(path("r.json")), "previous\n");
  EXPECT_FALSE(std::filesystem::exists(path("r.json.old")));
}

TEST_F(OutputFileTest, FifoWithoutReaderIsAnErrorNotAHang) {
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  auto f = OutputFile::Create("--events", path("fifo"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("nobody reads"), std::string::npos)
      << f.status().message();
  // With a reader it is written as it is.
  int rd = open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  auto g = OutputFile::Create("--events", path("fifo"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  (*g)->stream() << "line\n";
  EXPECT_TRUE((*g)->close().ok());
  char buf[16] = {};
  EXPECT_EQ(::read(rd, buf, sizeof buf), 5);
  EXPECT_STREQ(buf, "line\n");
  close(rd);
}

}  // namespace
}  // namespace looptrace
