// The ELF reader: bytes -> ElfFile (through a memfd, as Open takes a path),
// then what the resolver and the symbolizer do with one: symbol lookup by
// address, offset <-> address, and name, glob and offset resolution.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "elf/debug_file.h"
#include "elf/elf_file.h"
#include "elf/resolve.h"
#include "fuzz_check.h"

namespace {

namespace elf = looptrace::elf;

// The input as a file: an anonymous memfd, closed on every return.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("fuzz_elf", MFD_CLOEXEC);
    if (fd_ < 0) return;
    size_t done = 0;
    while (done < size) {
      ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) {
        close(fd_);
        fd_ = -1;
        return;
      }
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  bool ok() const { return fd_ >= 0; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

void check_lookup(const elf::ElfFile& f, uint64_t vaddr) {
  const elf::Symbol* s = f.find_symbol_by_vaddr(vaddr);
  if (!s) return;
  // Found means: contains vaddr, or a size-0 function shortly before it.
  LT_FUZZ_CHECK(vaddr >= s->vaddr);
  LT_FUZZ_CHECK(s->size == 0 ? s->is_func : vaddr - s->vaddr < s->size);
}

void check_resolve(const elf::ElfFile& f, const std::string& pattern) {
  auto m = elf::resolve_symbol(f, pattern);
  if (!m.ok()) {
    LT_FUZZ_CHECK(!m.status().message().empty());
    return;
  }
  // A uprobe goes only on code.
  LT_FUZZ_CHECK(f.offset_is_executable(m->file_offset));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemFile mem(data, size);
  if (!mem.ok()) return 0;
  auto file = elf::ElfFile::Open(mem.path());
  if (!file.ok()) return 0;
  const elf::ElfFile& f = *file;
  (void)f.build_id();
  (void)f.debuglink();
  // The same bytes from memory (a [vdso], MiniDebugInfo's image) read the
  // same.
  auto in_memory =
      elf::ElfFile::FromMemory("fuzz", std::vector<char>(data, data + size));
  LT_FUZZ_CHECK(in_memory.ok());
  LT_FUZZ_CHECK(in_memory->symbols().size() == f.symbols().size());
  // MiniDebugInfo: a fuzzed xz stream, decompressed and parsed.
  auto mini = elf::open_minidebuginfo(f);
  if (mini.ok()) (void)mini->symbols();

  // Bounded work per input: the first symbols are enough to reach every
  // path, and the fuzzer stays fast.
  constexpr size_t kSymbols = 16;
  size_t n = 0;
  for (const elf::Symbol& s : f.symbols()) {
    if (n++ == kSymbols) break;
    check_lookup(f, s.vaddr);
    check_lookup(f, s.vaddr + s.size / 2);
    check_lookup(f, s.vaddr + s.size + 1);
    auto off = f.vaddr_to_offset(s.vaddr);
    if (off.ok()) (void)f.offset_to_vaddr(*off);
    if (!s.is_func) {
      // A table of pointers: the slot's relocation or bytes.
      for (int slot : {0, 8, 16})
        check_resolve(f, fmt::format("*({}+{})", s.name, slot));
      continue;
    }
    check_resolve(f, s.name);
    check_resolve(f, s.demangled);
    check_resolve(f, elf::strip_params(s.demangled));
    if (off.ok()) check_resolve(f, fmt::format("{:#x}", *off));
  }
  for (const elf::Segment& seg : f.segments()) {
    check_lookup(f, seg.vaddr);
    (void)f.offset_to_vaddr(seg.offset);
    (void)f.offset_is_executable(seg.offset);
  }
  check_resolve(f, "main");
  check_resolve(f, "*draw*");
  check_resolve(f, "ns::W::draw(int)");
  check_resolve(f, "lt_missing_function");  // suggestions
  auto all = elf::resolve_symbols(mem.path(), "*", 8);
  if (all.ok()) LT_FUZZ_CHECK(!all->empty() && all->size() <= 8);
  return 0;
}
