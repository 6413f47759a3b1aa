#include "stripped_program.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace looptrace::test {

std::string shell_output(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
  if (!pipe) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe.get())) > 0) out.append(buf, n);
  return out;
}

bool shell_ok(const std::string& cmd) {
  return shell_output("(" + cmd + ") >/dev/null 2>&1; echo rc=$?") == "rc=0\n";
}

bool have_tool(const std::string& tool) {
  return shell_ok("command -v " + tool);
}

std::optional<uint64_t> nm_address(const std::string& path,
                                   const std::string& name) {
  std::istringstream in(shell_output("nm " + path + " 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string addr, type, sym;
    if (fields >> addr >> type >> sym && sym == name)
      return std::stoull(addr, nullptr, 16);
  }
  return std::nullopt;
}

std::optional<uint64_t> file_offset(const std::string& path, uint64_t vaddr) {
  std::istringstream in(shell_output("readelf -lW " + path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string type, off, va, pa, filesz;
    if (!(f >> type >> off >> va >> pa >> filesz) || type != "LOAD") continue;
    uint64_t o = std::stoull(off, nullptr, 16),
             v = std::stoull(va, nullptr, 16),
             s = std::stoull(filesz, nullptr, 16);
    if (vaddr >= v && vaddr - v < s) return vaddr - v + o;
  }
  return std::nullopt;
}

std::string readelf_build_id(const std::string& path) {
  return shell_output("readelf -n " + path +
                      " | sed -n 's/.*Build ID: *//p' | tr -d '\\n'");
}

StrippedProgram::~StrippedProgram() {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

void StrippedProgram::build(const std::string& prefix, const char* source,
                            const std::string& function,
                            const std::string& prog_name) {
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  dir = tmpl;
  std::ofstream(dir + "/prog.c") << source;
  full = dir + "/full";
  ASSERT_TRUE(shell_ok("cc -g -O1 -fPIE -pie -Wl,--build-id -o " + full + " " +
                       dir + "/prog.c"));
  std::optional<uint64_t> v = nm_address(full, function);
  ASSERT_TRUE(v) << "nm finds no " << function;
  vaddr = *v;
  std::optional<uint64_t> off = file_offset(full, vaddr);
  ASSERT_TRUE(off);
  offset = *off;
  build_id = readelf_build_id(full);
  ASSERT_GE(build_id.size(), 4u);
  prog = dir + "/" + prog_name;
  debug = dir + "/prog.debug";
  std::filesystem::create_directories(
      std::filesystem::path(prog).parent_path());
  ASSERT_TRUE(shell_ok("objcopy --only-keep-debug " + full + " " + debug));
  ASSERT_TRUE(shell_ok("strip --strip-all -o " + prog + " " + full));
  // Stripped for real: nm finds nothing to name the function by.
  ASSERT_FALSE(nm_address(prog, function));
}

MapEntry StrippedProgram::mapping(uint64_t base) const {
  struct stat st;
  EXPECT_EQ(stat(prog.c_str(), &st), 0);
  MapEntry m;
  m.start = base;
  m.end = base + 0x10000;
  m.perms = "r-xp";
  m.dev = "00:00";
  m.inode = st.st_ino;
  m.path = prog;
  return m;
}

}  // namespace looptrace::test
