// V8's post-mortem metadata read from the installed /usr/bin/node and
// checked against independent readers run here (nm for the symbols and
// their sections, objdump for the bytes, node itself for its V8 version,
// readelf for the build-id); the refusal of a binary without metadata; the
// .bss constants filled from a fake process memory and from a live node.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "proc/maps.h"
#include "v8/metadata.h"

namespace looptrace::v8 {
namespace {

constexpr char kNode[] = "/usr/bin/node";

bool have_node() { return access(kNode, X_OK) == 0; }

bool have_tool(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

// What the command prints on stdout.
std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

struct NmSymbol {
  uint64_t vaddr = 0;
  char type = 0;  // D data, R read-only, B bss
};

// nm's view of node's exported v8dbg_ symbols.
std::map<std::string, NmSymbol> nm_v8dbg() {
  std::map<std::string, NmSymbol> out;
  std::istringstream in(run(std::string("nm -D --defined-only ") + kNode));
  std::string addr, type, name;
  while (in >> addr >> type >> name)
    if (name.rfind("v8dbg_", 0) == 0)
      out[name] = {std::stoull(addr, nullptr, 16), type[0]};
  return out;
}

// The little-endian int objdump shows at vaddr in node; nullopt when it
// shows no bytes there (.bss).
std::optional<int32_t> objdump_int(uint64_t vaddr) {
  char cmd[256];
  std::snprintf(cmd, sizeof(cmd),
                "objdump -s --start-address=%#lx --stop-address=%#lx %s",
                static_cast<unsigned long>(vaddr),
                static_cast<unsigned long>(vaddr + 4), kNode);
  std::istringstream in(run(cmd));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string addr, hex;
    if (!(words >> addr >> hex) || hex.size() != 8) continue;
    if (addr.find_first_not_of("0123456789abcdef") != std::string::npos ||
        std::stoull(addr, nullptr, 16) != vaddr)
      continue;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16))
           << (8 * i);
    return static_cast<int32_t>(v);
  }
  return std::nullopt;
}

TEST(V8Metadata, ReadsTheInstalledNode) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  Result<V8Layout> l = read_v8_layout(kNode);
  ASSERT_TRUE(l.ok()) << l.status().message();

  // node's own word for its V8: "11.3.244.8-node.38".
  std::string v8 = run(std::string(kNode) + " -p process.versions.v8");
  while (!v8.empty() && v8.back() == '\n') v8.pop_back();
  ASSERT_FALSE(l->v8_version.empty());
  EXPECT_EQ(v8.substr(0, l->v8_version.size()), l->v8_version) << v8;
  if (v8.size() > l->v8_version.size()) {
    EXPECT_EQ(v8[l->v8_version.size()], '-') << v8;
  }

  if (have_tool("readelf")) {
    const std::string notes = run(std::string("readelf -n ") + kNode +
                                  " 2>/dev/null | grep 'Build ID'");
    EXPECT_NE(notes.find(l->build_id), std::string::npos) << notes;
  }
  EXPECT_EQ(l->build_id.size(), 40u);

  // What any V8 on x86-64 has: a frame's function below fp, tagged heap
  // pointers ending in 1, Smis ending in 0, distinct frame kinds.
  EXPECT_LT(l->frame.function, 0);
  EXPECT_EQ(l->tagging.heap_object_tag, 1);
  EXPECT_EQ(l->tagging.smi_tag, 0);
  EXPECT_EQ(l->objects.heap_object_map, 0);
  const std::set<int32_t> kinds = {
      l->frame_types.entry,       l->frame_types.exit,
      l->frame_types.interpreted, l->frame_types.baseline,
      l->frame_types.turbofan,    l->frame_types.stub,
      l->frame_types.builtin,     l->frame_types.construct};
  EXPECT_EQ(kinds.size(), 8u);
  EXPECT_EQ(kinds.count(kAbsent), 0u);
  EXPECT_FALSE(l->process_filled);
  EXPECT_FALSE(l->process_resident.empty());
}

TEST(V8Metadata, AgreesWithNmAndObjdump) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  if (!have_tool("nm") || !have_tool("objdump"))
    GTEST_SKIP() << "nm or objdump is not installed";
  Result<V8Layout> l = read_v8_layout(kNode);
  ASSERT_TRUE(l.ok()) << l.status().message();
  const std::map<std::string, NmSymbol> nm = nm_v8dbg();
  ASSERT_GT(nm.size(), 400u);

  size_t file = 0, process = 0;
  for (const Constant& c : l->constants) {
    auto it = nm.find(c.symbol);
    if (c.origin == Origin::kAbsent) {
      EXPECT_EQ(it, nm.end()) << c.symbol << " exists but was not read";
      continue;
    }
    if (c.origin == Origin::kDerived) continue;
    ASSERT_NE(it, nm.end()) << c.symbol;
    EXPECT_EQ(c.vaddr, it->second.vaddr) << c.symbol;
    if (it->second.type == 'B' || it->second.type == 'b') {
      // No bytes in the file: the reader gives the loader's zero.
      EXPECT_EQ(c.origin, Origin::kProcess) << c.symbol;
      EXPECT_EQ(c.value, 0) << c.symbol;
      ++process;
    } else {
      EXPECT_EQ(c.origin, Origin::kFile) << c.symbol;
      EXPECT_EQ(std::optional<int32_t>(c.value), objdump_int(c.vaddr))
          << c.symbol;
      ++file;
    }
  }
  EXPECT_GT(file, 50u);
  EXPECT_GT(process, 0u);
  EXPECT_EQ(process, l->process_resident.size());

  // The fields hold the constants of their names (the table's wiring).
  auto truth = [&](const char* name) -> std::optional<int32_t> {
    auto it = nm.find(name);
    if (it == nm.end()) return std::nullopt;
    if (it->second.type == 'B') return 0;
    return objdump_int(it->second.vaddr);
  };
  const std::pair<int32_t, const char*> fields[] = {
      {l->frame.function, "v8dbg_off_fp_function"},
      {l->frame.context_or_frame_type, "v8dbg_off_fp_context_or_frame_type"},
      {l->frame.bytecode_array, "v8dbg_off_fp_bytecode_array"},
      {l->frame.bytecode_offset, "v8dbg_off_fp_bytecode_offset"},
      {l->frame_types.entry, "v8dbg_frametype_EntryFrame"},
      {l->frame_types.exit, "v8dbg_frametype_ExitFrame"},
      {l->frame_types.interpreted, "v8dbg_frametype_InterpretedFrame"},
      {l->frame_types.baseline, "v8dbg_frametype_BaselineFrame"},
      {l->frame_types.turbofan, "v8dbg_frametype_TurbofanFrame"},
      {l->frame_types.stub, "v8dbg_frametype_StubFrame"},
      {l->tagging.heap_object_tag, "v8dbg_HeapObjectTag"},
      {l->tagging.smi_tag, "v8dbg_SmiTag"},
      {l->tagging.smi_shift_size, "v8dbg_SmiShiftSize"},
      {l->tagging.smi_value_shift, "v8dbg_SmiValueShift"},
      {l->objects.heap_object_map, "v8dbg_class_HeapObject__map__Map"},
      {l->objects.map_instance_type,
       "v8dbg_class_Map__instance_type__uint16_t"},
      {l->objects.js_function_shared,
       "v8dbg_class_JSFunction__shared__SharedFunctionInfo"},
      {l->objects.sfi_name_or_scope_info,
       "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object"},
      {l->objects.sfi_script_or_debug_info,
       "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject"},
      {l->objects.sfi_function_data,
       "v8dbg_class_SharedFunctionInfo__function_data__Object"},
      {l->objects.script_name, "v8dbg_class_Script__name__Object"},
      {l->objects.script_line_ends, "v8dbg_class_Script__line_ends__Object"},
      {l->objects.string_length, "v8dbg_class_String__length__int32_t"},
      {l->objects.seq_one_byte_string_chars,
       "v8dbg_class_SeqOneByteString__chars__char"},
      {l->types.js_function, "v8dbg_type_JSFunction__JS_FUNCTION_TYPE"},
      {l->types.shared_function_info,
       "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE"},
      {l->types.script, "v8dbg_type_Script__SCRIPT_TYPE"},
      {l->types.scope_info, "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE"},
      {l->types.first_nonstring, "v8dbg_FirstNonstringType"},
      {l->strings.encoding_mask, "v8dbg_StringEncodingMask"},
      {l->strings.cons, "v8dbg_ConsStringTag"},
  };
  for (const auto& [value, name] : fields) {
    const std::optional<int32_t> want = truth(name);
    ASSERT_TRUE(want.has_value()) << name << " not in nm/objdump";
    EXPECT_EQ(value, *want) << name;
  }
}

TEST(V8Metadata, RefusesABinaryWithoutMetadataInOneLine) {
  const char* path =
      access("/bin/true", R_OK) == 0 ? "/bin/true" : "/usr/bin/true";
  Result<V8Layout> l = read_v8_layout(path);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(),
            std::string(path) +
                ": no V8 post-mortem metadata (v8dbg_off_fp_function missing)");
  EXPECT_EQ(l.status().message().find('\n'), std::string::npos);
}

TEST(V8Metadata, AMissingFileIsAnError) {
  Result<V8Layout> l = read_v8_layout("/nonexistent/node");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("/nonexistent/node"), std::string::npos)
      << l.status().message();
}

TEST(V8Metadata, FillsBssConstantsFromAFakeProcess) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  Result<V8Layout> read = read_v8_layout(kNode);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Constant* shift = find_constant(*read, "v8dbg_CodeKindFieldShift");
  ASSERT_NE(shift, nullptr);
  ASSERT_EQ(shift->origin, Origin::kProcess);

  // A process whose static initializers set CodeKindFieldShift to 7.
  std::map<uint64_t, int32_t> memory;
  for (const Constant& c : read->process_resident) memory[c.vaddr] = 0;
  memory[shift->vaddr] = 7;
  std::set<uint64_t> asked;
  auto fake = [&](uint64_t addr, void* out, size_t n) {
    asked.insert(addr);
    auto it = memory.find(addr);
    if (it == memory.end() || n != sizeof(int32_t)) return false;
    std::memcpy(out, &it->second, n);
    return true;
  };
  V8Layout l = *read;
  Status st = fill_from_process(&l, fake);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(l.process_filled);
  EXPECT_EQ(asked.size(), read->process_resident.size());
  EXPECT_EQ(l.code_kinds.field_shift, 7);
  EXPECT_EQ(find_constant(l, "v8dbg_CodeKindFieldShift")->value, 7);
  EXPECT_EQ(l.tagging.smi_tag, 0);

  // Memory that cannot be read: the symbol is named, the layout unchanged.
  V8Layout unread = *read;
  st =
      fill_from_process(&unread, [](uint64_t, void*, size_t) { return false; });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot read v8dbg_"), std::string::npos)
      << st.message();
  EXPECT_FALSE(unread.process_filled);

  // A Smi tag equal to the heap object tag is no layout to walk.
  const Constant* smi = find_constant(*read, "v8dbg_SmiTag");
  ASSERT_NE(smi, nullptr);
  ASSERT_EQ(smi->origin, Origin::kProcess);
  memory[shift->vaddr] = 0;
  memory[smi->vaddr] = 1;
  V8Layout bad = *read;
  st = fill_from_process(&bad, fake);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tagging"), std::string::npos) << st.message();
  EXPECT_EQ(bad.tagging.smi_tag, 0);
  EXPECT_FALSE(bad.process_filled);
}

// A node that waits 3 s: its .bss constants read through /proc/PID/mem.
TEST(V8Metadata, FillsBssConstantsFromALiveNode) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  Result<V8Layout> read = read_v8_layout(kNode);
  ASSERT_TRUE(read.ok()) << read.status().message();
  Result<elf::ElfFile> elf =
      elf::ElfFile::Open(kNode, elf::ElfFile::Read::kHeaders);
  ASSERT_TRUE(elf.ok()) << elf.status().message();

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    // "ready" once node runs JS: every static initializer has run by then.
    execl(kNode, kNode, "-e", "console.log('ready'); setTimeout(()=>{},3000)",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[16] = {};
  const ssize_t got = ::read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  ASSERT_GT(got, 0) << "node printed nothing";
  ASSERT_EQ(std::string(buf, 5), "ready");

  // The load bias: where the mapping of the file's offset 0 starts, less
  // the address the file gives that offset (0 for a non-PIE node).
  Result<std::vector<MapEntry>> maps = proc::read_maps(pid);
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  std::optional<uint64_t> bias;
  for (const MapEntry& m : *maps) {
    if (m.path != kNode || m.pgoff != 0) continue;
    Result<uint64_t> vaddr = elf->offset_to_vaddr(0);
    ASSERT_TRUE(vaddr.ok()) << vaddr.status().message();
    bias = m.start - (*vaddr & ~uint64_t{0xfff});
    break;
  }
  ASSERT_TRUE(bias.has_value()) << kNode << " is not mapped by " << pid;

  const int mem = open(("/proc/" + std::to_string(pid) + "/mem").c_str(),
                       O_RDONLY | O_CLOEXEC);
  if (mem < 0) GTEST_SKIP() << "cannot open /proc/PID/mem of a child";
  auto from_proc = [&](uint64_t addr, void* out, size_t n) {
    return pread(mem, out, n, static_cast<off_t>(addr + *bias)) ==
           static_cast<ssize_t>(n);
  };
  V8Layout l = *read;
  const Status st = fill_from_process(&l, from_proc);
  close(mem);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(l.process_filled);

  // Nothing in this node writes them: the live values are the file's zeros
  // (the static initializer named after v8dbg_frametype_EntryFrame only sets
  // up iostreams).
  for (const Constant& c : l.process_resident) {
    EXPECT_EQ(c.value, 0) << c.symbol;
  }
  // The frame markers a walker tells frames apart by: distinct small ints.
  std::set<int32_t> markers;
  size_t present = 0;
  for (const Constant& c : l.constants) {
    if (c.symbol.rfind("v8dbg_frametype_", 0) != 0 ||
        c.origin == Origin::kAbsent)
      continue;
    ++present;
    EXPECT_GT(c.value, 0) << c.symbol;
    EXPECT_LT(c.value, 64) << c.symbol;
    markers.insert(c.value);
  }
  EXPECT_GE(present, 10u);
  EXPECT_EQ(markers.size(), present);
}

}  // namespace
}  // namespace looptrace::v8
