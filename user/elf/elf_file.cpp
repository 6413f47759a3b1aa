#include "elf/elf_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/demangle.h"
#include "base/log.h"

namespace looptrace::elf {
namespace {

// A size-0 FUNC symbol (assembly without .size) is credited with addresses
// up to this far after it; further away the guess is more likely wrong.
constexpr uint64_t kZeroSizeReach = 4096;

bool init_libelf() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = elf_version(EV_CURRENT) != EV_NONE; });
  return ok;
}

ErrorKind kind_for_errno(int err) {
  if (err == EACCES || err == EPERM) return ErrorKind::kPermission;
  if (err == ENOENT || err == ENOTDIR || err == EISDIR)
    return ErrorKind::kUsage;
  return ErrorKind::kFailure;
}

std::string hex(const uint8_t* p, size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; i++) out += fmt::format("{:02x}", p[i]);
  return out;
}

// Looks for NT_GNU_BUILD_ID in one note buffer.
std::string build_id_in(Elf_Data* data) {
  if (!data || !data->d_buf) return "";
  size_t off = 0;
  GElf_Nhdr nhdr;
  size_t name_off = 0;
  size_t desc_off = 0;
  while (off < data->d_size) {
    size_t next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off);
    if (next == 0) break;
    const auto* base = static_cast<const uint8_t*>(data->d_buf);
    if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
        std::memcmp(base + name_off, "GNU", 4) == 0)
      return hex(base + desc_off, nhdr.n_descsz);
    off = next;
  }
  return "";
}

// a + b, or nullopt when it overflows (a hostile header's offsets).
std::optional<uint64_t> add(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// Start + count * entry size of a header table, or nullopt on overflow.
std::optional<uint64_t> table_end(uint64_t start, uint64_t count,
                                  uint64_t entry) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, entry, &bytes)) return std::nullopt;
  return add(start, bytes);
}

}  // namespace

ElfFile::ElfFile(std::string path, int fd, Elf* elf)
    : path_(std::move(path)), fd_(fd), elf_(elf) {}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      bytes_(std::move(other.bytes_)),
      elf_(std::exchange(other.elf_, nullptr)),
      is_dyn_(other.is_dyn_),
      has_symtab_(other.has_symtab_),
      build_id_(std::move(other.build_id_)),
      debuglink_(std::move(other.debuglink_)),
      debuglink_crc_(other.debuglink_crc_),
      segments_(std::move(other.segments_)),
      symbols_(std::move(other.symbols_)),
      max_end_(std::move(other.max_end_)) {}

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
  if (this != &other) {
    ElfFile tmp(std::move(other));
    std::swap(path_, tmp.path_);
    std::swap(fd_, tmp.fd_);
    std::swap(bytes_, tmp.bytes_);
    std::swap(elf_, tmp.elf_);
    std::swap(is_dyn_, tmp.is_dyn_);
    std::swap(has_symtab_, tmp.has_symtab_);
    std::swap(build_id_, tmp.build_id_);
    std::swap(debuglink_, tmp.debuglink_);
    std::swap(debuglink_crc_, tmp.debuglink_crc_);
    std::swap(segments_, tmp.segments_);
    std::swap(symbols_, tmp.symbols_);
    std::swap(max_end_, tmp.max_end_);
  }
  return *this;
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (fd_ >= 0) close(fd_);
}

Result<ElfFile> ElfFile::Open(const std::string& path, Read what) {
  if (!init_libelf())
    return Status::Error(fmt::format("{}: libelf: {}", path, elf_errmsg(-1)));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status::Errno("open " + path, err, kind_for_errno(err));
  }
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  // From here the object owns fd and elf, so every return closes them.
  ElfFile file(path, fd, elf);
  if (!elf || elf_kind(elf) != ELF_K_ELF)
    return Status::Error(path + ": not an ELF file", ErrorKind::kUsage);
  LT_RETURN_IF_ERROR(file.load(what));
  return file;
}

Result<ElfFile> ElfFile::FromMemory(std::string name, std::vector<char> bytes) {
  if (!init_libelf())
    return Status::Error(fmt::format("{}: libelf: {}", name, elf_errmsg(-1)));
  ElfFile file(std::move(name), -1, nullptr);
  file.bytes_ = std::move(bytes);
  if (file.bytes_.empty())
    return Status::Error(file.path_ + ": not an ELF file", ErrorKind::kUsage);
  file.elf_ = elf_memory(file.bytes_.data(), file.bytes_.size());
  if (!file.elf_ || elf_kind(file.elf_) != ELF_K_ELF)
    return Status::Error(file.path_ + ": not an ELF file", ErrorKind::kUsage);
  LT_RETURN_IF_ERROR(file.load());
  return file;
}

Status ElfFile::check_extents() const {
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf_, &ehdr))
    return Status::Error(
        fmt::format("{}: bad ELF header: {}", path_, elf_errmsg(-1)),
        ErrorKind::kUsage);
  uint64_t size = bytes_.size();
  if (fd_ >= 0) {
    struct stat st;
    if (fstat(fd_, &st) != 0) return Status::Errno("stat " + path_, errno);
    size = static_cast<uint64_t>(st.st_size);
  }
  // Without this a file cut short (a copy that failed, a full disk) loses
  // its section headers, which sit at the end, and would be reported as
  // "stripped".
  auto beyond = [&](std::optional<uint64_t> end, std::string_view what) {
    if (end && *end <= size) return Status::Ok();
    return Status::Error(
        end ? fmt::format("{}: truncated ELF file: {} end at byte {}, the "
                          "file has {}",
                          path_, what, *end, size)
            : fmt::format("{}: corrupt ELF file: {} lie past 2^64", path_,
                          what),
        ErrorKind::kUsage);
  };
  if (ehdr.e_phoff != 0)
    LT_RETURN_IF_ERROR(
        beyond(table_end(ehdr.e_phoff, ehdr.e_phnum, ehdr.e_phentsize),
               "the program headers"));
  if (ehdr.e_shoff != 0)
    LT_RETURN_IF_ERROR(
        beyond(table_end(ehdr.e_shoff, ehdr.e_shnum, ehdr.e_shentsize),
               "the section headers"));
  size_t nphdr = 0;
  if (elf_getphdrnum(elf_, &nphdr) != 0)
    return Status::Error(
        fmt::format("{}: bad program headers: {}", path_, elf_errmsg(-1)),
        ErrorKind::kUsage);
  for (size_t i = 0; i < nphdr; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD)
      continue;
    LT_RETURN_IF_ERROR(beyond(add(ph.p_offset, ph.p_filesz),
                              fmt::format("loadable segment {}", i)));
  }
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn;
       scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    LT_RETURN_IF_ERROR(beyond(add(sh.sh_offset, sh.sh_size),
                              fmt::format("section {}", elf_ndxscn(scn))));
  }
  return Status::Ok();
}

Status ElfFile::load(Read what) {
  // x86-64 code only: 64-bit, little-endian. Read from the identification
  // bytes, before any field whose size or byte order they decide.
  size_t n = 0;
  const char* ident = elf_getident(elf_, &n);
  if (!ident || n < EI_NIDENT)
    return Status::Error(path_ + ": not an ELF file", ErrorKind::kUsage);
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
    return Status::Error(
        fmt::format("{}: a {} {} ELF file; looptrace reads 64-bit "
                    "little-endian ones only",
                    path_,
                    ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                    : ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                    : "bad-class",
                    ident[EI_DATA] == ELFDATA2MSB   ? "big-endian"
                    : ident[EI_DATA] == ELFDATA2LSB ? "little-endian"
                                                    : "bad-byte-order"),
        ErrorKind::kUsage);
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf_, &ehdr))
    return Status::Error(
        fmt::format("{}: bad ELF header: {}", path_, elf_errmsg(-1)),
        ErrorKind::kUsage);
  is_dyn_ = ehdr.e_type == ET_DYN;
  LT_RETURN_IF_ERROR(check_extents());

  size_t nphdr = 0;
  if (elf_getphdrnum(elf_, &nphdr) != 0)
    return Status::Error(
        fmt::format("{}: bad program headers: {}", path_, elf_errmsg(-1)));
  for (size_t i = 0; i < nphdr; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD)
      continue;
    segments_.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz,
                         (ph.p_flags & PF_X) != 0});
  }

  load_build_id();
  load_debuglink();
  if (what == Read::kHeaders) return Status::Ok();
  return load_symbols(what == Read::kDynsym);
}

void ElfFile::load_build_id() {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    build_id_ = build_id_in(elf_getdata(scn, nullptr));
    if (!build_id_.empty()) return;
  }
  // Files without section headers still carry the note in a PT_NOTE.
  size_t nphdr = 0;
  if (elf_getphdrnum(elf_, &nphdr) != 0) return;
  for (size_t i = 0; i < nphdr; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &ph) || ph.p_type != PT_NOTE)
      continue;
    Elf_Data* data = elf_getdata_rawchunk(
        elf_, static_cast<int64_t>(ph.p_offset), ph.p_filesz,
        ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
    build_id_ = build_id_in(data);
    if (!build_id_.empty()) return;
  }
}

void ElfFile::load_debuglink() {
  std::optional<std::string_view> raw = section_bytes(".gnu_debuglink");
  if (!raw) return;
  // The name, NUL-terminated, padded to 4 bytes, then the CRC in the
  // file's byte order.
  size_t nul = raw->find('\0');
  if (nul == std::string_view::npos || nul == 0) return;
  size_t crc_at = (nul + 4) & ~size_t{3};
  if (crc_at + 4 > raw->size()) return;
  uint8_t b[4];
  std::memcpy(b, raw->data() + crc_at, 4);
  GElf_Ehdr ehdr;
  bool msb = gelf_getehdr(elf_, &ehdr) && ehdr.e_ident[EI_DATA] == ELFDATA2MSB;
  debuglink_crc_ = msb ? uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 |
                             uint32_t{b[2]} << 8 | uint32_t{b[3]}
                       : uint32_t{b[3]} << 24 | uint32_t{b[2]} << 16 |
                             uint32_t{b[1]} << 8 | uint32_t{b[0]};
  debuglink_ = std::string(raw->substr(0, nul));
}

std::optional<std::string_view> ElfFile::section_bytes(
    std::string_view name) const {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return std::nullopt;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn;
       scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* n = elf_strptr(elf_, shstrndx, sh.sh_name);
    if (!n || name != n) continue;
    // Raw: the bytes as stored (a compressed section stays compressed).
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (!data || !data->d_buf || data->d_size == 0) return std::nullopt;
    return std::string_view(static_cast<const char*>(data->d_buf),
                            data->d_size);
  }
  return std::nullopt;
}

void ElfFile::merge_symbols(const std::vector<Symbol>& more) {
  std::vector<Symbol> all = std::move(symbols_);
  all.insert(all.end(), more.begin(), more.end());
  symbols_.clear();
  max_end_.clear();
  index_symbols(std::move(all));
  log::debug("elf", "{}: {} symbols after merging {} more", path_,
             symbols_.size(), more.size());
}

Status ElfFile::load_symbols(bool dynsym_only) {
  // .gnu.version runs parallel to .dynsym; its hidden bit marks versions
  // that only old binaries bind to.
  Elf_Data* versym = nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn;
       scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym)
      versym = elf_getdata(scn, nullptr);
  }

  std::vector<Symbol> all;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    if (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM) continue;
    bool dynsym = shdr.sh_type == SHT_DYNSYM;
    if (dynsym_only && !dynsym) continue;
    if (!dynsym) has_symtab_ = true;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || shdr.sh_entsize == 0) continue;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 0; i < count; i++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      int type = GELF_ST_TYPE(sym.st_info);
      // STT_GNU_IFUNC is left out on purpose: its address is the resolver
      // that runs once at load time, not the implementation that is called.
      if (type != STT_FUNC && type != STT_OBJECT) continue;
      if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
      const char* raw = elf_strptr(elf_, shdr.sh_link, sym.st_name);
      if (!raw || !*raw) continue;
      std::string name(raw);
      bool hidden = false;
      // .symtab spells versioned symbols "memcpy@GLIBC_2.2.5" (one '@':
      // not the default version) or "memcpy@@GLIBC_2.14"; users and
      // .dynsym say "memcpy".
      if (size_t at = name.find('@'); at != std::string::npos && at > 0) {
        hidden = name.compare(at, 2, "@@") != 0;
        name.resize(at);
      }
      GElf_Versym ver;
      if (dynsym && versym && gelf_getversym(versym, static_cast<int>(i), &ver))
        hidden = (ver & 0x8000) != 0;
      all.push_back({std::move(name), "", sym.st_value, sym.st_size,
                     type == STT_FUNC, dynsym, hidden});
    }
  }

  index_symbols(std::move(all));
  log::debug("elf", "{}: {} symbols, symtab={}, build-id={}", path_,
             symbols_.size(), has_symtab_, build_id_);
  return Status::Ok();
}

void ElfFile::index_symbols(std::vector<Symbol> all) {
  // Merge the .symtab and .dynsym copies of one symbol.
  std::sort(all.begin(), all.end(), [](const Symbol& a, const Symbol& b) {
    return std::tie(a.vaddr, a.name) < std::tie(b.vaddr, b.name);
  });
  for (Symbol& s : all) {
    if (!symbols_.empty() && symbols_.back().vaddr == s.vaddr &&
        symbols_.back().name == s.name) {
      Symbol& kept = symbols_.back();
      kept.from_dynsym = kept.from_dynsym || s.from_dynsym;
      kept.is_func = kept.is_func || s.is_func;
      kept.size = std::max(kept.size, s.size);
      kept.hidden_version = kept.hidden_version && s.hidden_version;
      continue;
    }
    symbols_.push_back(std::move(s));
  }
  // At one address, the preferred alias comes first: FUNC, exported,
  // default version.
  auto rank = [](const Symbol& s) {
    return std::make_tuple(s.vaddr, !s.is_func, !s.from_dynsym,
                           s.hidden_version, std::cref(s.name));
  };
  std::sort(
      symbols_.begin(), symbols_.end(),
      [&](const Symbol& a, const Symbol& b) { return rank(a) < rank(b); });
  max_end_.reserve(symbols_.size());
  uint64_t max_end = 0;
  for (Symbol& s : symbols_) {
    if (s.demangled.empty()) s.demangled = demangle(s.name);
    max_end = std::max(max_end, s.vaddr + s.size);
    max_end_.push_back(max_end);
  }
}

namespace {

// The dynamic relocation of the slot at `vaddr` in `elf` (the first of any
// RELA section) and its symbol (`name` null when it has none that reads).
bool relocation_at(Elf* elf, uint64_t vaddr, GElf_Rela* rela, GElf_Sym* sym,
                   const char** name) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn;
       scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_entsize == 0)
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    const size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      if (!gelf_getrela(data, static_cast<int>(i), rela) ||
          rela->r_offset != vaddr)
        continue;
      // Its symbol, in the linked symbol table (.dynsym).
      *sym = {};
      *name = nullptr;
      Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
      Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
      GElf_Shdr symsh;
      if (syms && gelf_getshdr(symscn, &symsh) &&
          gelf_getsym(syms, static_cast<int>(GELF_R_SYM(rela->r_info)), sym))
        *name = elf_strptr(elf, symsh.sh_link, sym->st_name);
      return true;
    }
  }
  return false;
}

}  // namespace

Result<uint64_t> ElfFile::pointer_at(uint64_t vaddr) const {
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf_, &ehdr) || ehdr.e_machine != EM_X86_64)
    return Status::Error(
        fmt::format("{}: reading pointers needs an x86-64 file", path_),
        ErrorKind::kUsage);
  GElf_Rela r;
  GElf_Sym sym;
  const char* name = nullptr;
  if (relocation_at(elf_, vaddr, &r, &sym, &name)) {
    const uint32_t type = GELF_R_TYPE(r.r_info);
    if (type == R_X86_64_RELATIVE) return static_cast<uint64_t>(r.r_addend);
    if (type != R_X86_64_64 && type != R_X86_64_GLOB_DAT)
      return Status::Error(
          fmt::format("{}: the relocation at {:#x} is of type {}, not an "
                      "address",
                      path_, vaddr, type),
          ErrorKind::kUsage);
    if (name == nullptr || sym.st_shndx == SHN_UNDEF)
      return Status::Error(
          fmt::format("{}: the address at {:#x} is another object's "
                      "symbol (resolved at load time)",
                      path_, vaddr),
          ErrorKind::kUsage);
    return sym.st_value + static_cast<uint64_t>(r.r_addend);
  }
  uint64_t v = 0;
  LT_RETURN_IF_ERROR(read_bytes(vaddr, &v, sizeof(v)));
  return v;
}

std::optional<std::string> ElfFile::imported_at(uint64_t vaddr) const {
  GElf_Rela r;
  GElf_Sym sym;
  const char* name = nullptr;
  if (!relocation_at(elf_, vaddr, &r, &sym, &name)) return std::nullopt;
  const uint32_t type = GELF_R_TYPE(r.r_info);
  if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
      name == nullptr || sym.st_shndx != SHN_UNDEF)
    return std::nullopt;
  return std::string(name);
}

Status ElfFile::read_bytes(uint64_t vaddr, void* out, size_t n) const {
  Status none = Status::Error(
      fmt::format("{}: no {} bytes of the file at {:#x}", path_, n, vaddr),
      ErrorKind::kUsage);
  if (n == 0 || vaddr > UINT64_MAX - (n - 1)) return none;
  // The segment's file part may end inside the n bytes.
  Result<uint64_t> off = vaddr_to_offset(vaddr);
  Result<uint64_t> last = vaddr_to_offset(vaddr + (n - 1));
  if (!off.ok() || !last.ok() || *last != *off + (n - 1)) return none;
  // From the file, not libelf's mapping of it: a uprobe on the file (any
  // tracer's, looptrace's own among them, attached for every process) puts
  // its breakpoint into every private mapping of the file that may
  // execute, libelf's read-only one too, and code decoded there reads
  // int3 where a probe is (AndroidLooper.ASecondTracerFindsTheCallSites-
  // TheFirstProbes). read() sees the page cache, which uprobes leave
  // alone.
  if (fd_ >= 0) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = pread(fd_, static_cast<char*>(out) + got, n - got,
                              static_cast<off_t>(*off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return none;
      got += static_cast<size_t>(r);
    }
    return Status::Ok();
  }
  Elf_Data* chunk =
      elf_getdata_rawchunk(elf_, static_cast<int64_t>(*off), n, ELF_T_BYTE);
  if (!chunk || !chunk->d_buf || chunk->d_size < n) return none;
  std::memcpy(out, chunk->d_buf, n);
  return Status::Ok();
}

const Symbol* ElfFile::find_object(const std::string& name) const {
  for (const Symbol& s : symbols_)
    if (!s.is_func && !s.hidden_version && s.name == name) return &s;
  return nullptr;
}

Result<uint32_t> ElfFile::u32_at(uint64_t vaddr) const {
  uint32_t v = 0;
  LT_RETURN_IF_ERROR(read_bytes(vaddr, &v, sizeof(v)));
  return v;
}

Result<uint64_t> ElfFile::vaddr_to_offset(uint64_t vaddr) const {
  const Segment* found = nullptr;
  for (const Segment& s : segments_) {
    if (vaddr < s.vaddr || vaddr - s.vaddr >= s.filesz) continue;
    if (!found || (s.executable && !found->executable)) found = &s;
  }
  if (!found)
    return Status::Error(fmt::format(
        "{}: address {:#x} is not in the file part of any PT_LOAD segment",
        path_, vaddr));
  return vaddr - found->vaddr + found->offset;
}

const Segment* ElfFile::segment_for_offset(uint64_t offset) const {
  const Segment* found = nullptr;
  for (const Segment& s : segments_) {
    if (offset < s.offset || offset - s.offset >= s.filesz) continue;
    if (!found || (s.executable && !found->executable)) found = &s;
  }
  return found;
}

Result<uint64_t> ElfFile::offset_to_vaddr(uint64_t offset) const {
  const Segment* s = segment_for_offset(offset);
  if (!s)
    return Status::Error(fmt::format(
        "{}: file offset {:#x} is not in any PT_LOAD segment", path_, offset));
  return offset - s->offset + s->vaddr;
}

bool ElfFile::offset_is_executable(uint64_t offset) const {
  const Segment* s = segment_for_offset(offset);
  return s && s->executable;
}

const Symbol* ElfFile::find_symbol_by_vaddr(uint64_t vaddr) const {
  auto it =
      std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                       [](uint64_t v, const Symbol& s) { return v < s.vaddr; });
  size_t end = static_cast<size_t>(it - symbols_.begin());

  // Walk back from the last symbol starting at or before vaddr while some
  // symbol at or before index i still reaches vaddr (max_end_). The first
  // container seen starts closest to vaddr, i.e. is the innermost. Symbols
  // at one address are sorted best first, so an earlier one at the same
  // address replaces the current pick.
  const Symbol* best = nullptr;
  for (size_t i = end; i > 0 && max_end_[i - 1] > vaddr; i--) {
    const Symbol& s = symbols_[i - 1];
    if (s.size == 0 || vaddr - s.vaddr >= s.size) continue;
    if (!best || s.vaddr == best->vaddr || (s.is_func && !best->is_func))
      best = &s;
  }
  if (best || end == 0) return best;

  // Nothing contains vaddr: a size-0 function just before it may.
  size_t first = end - 1;
  while (first > 0 && symbols_[first - 1].vaddr == symbols_[end - 1].vaddr)
    first--;
  for (size_t i = first; i < end; i++) {
    const Symbol& s = symbols_[i];
    if (s.is_func && s.size == 0 && vaddr - s.vaddr < kZeroSizeReach) return &s;
  }
  return nullptr;
}

}  // namespace looptrace::elf
