#include "unwind/dwarf_unwinder.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <libelf.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "proc/maps.h"
#include "proc/process.h"

namespace looptrace {
namespace {

// This process's vDSO image. Every x86-64 process of one kernel maps the
// same one, so it stands in for the target's (whose bytes a recording does
// not have). Empty when there is none.
const std::vector<char>& own_vdso() {
  static const std::vector<char> image = [] {
    std::vector<char> bytes;
    uint64_t base = getauxval(AT_SYSINFO_EHDR);
    if (base == 0) return bytes;
    Result<std::vector<MapEntry>> maps =
        proc::read_maps(static_cast<uint32_t>(getpid()));
    if (!maps.ok()) return bytes;
    for (const MapEntry& m : *maps)
      if (m.path == "[vdso]" && m.start == base) {
        const char* p = reinterpret_cast<const char*>(base);
        bytes.assign(p, p + (m.end - m.start));
      }
    return bytes;
  }();
  return image;
}

// An ELF header that says "x86-64" and nothing else: libdwfl takes the
// architecture (its register set and default CFI) from an Elf.
Elf64_Ehdr x86_64_ehdr() {
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS64;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_ident[EI_OSABI] = ELFOSABI_SYSV;
  h.e_type = ET_EXEC;
  h.e_machine = EM_X86_64;
  h.e_version = EV_CURRENT;
  h.e_ehsize = sizeof(Elf64_Ehdr);
  return h;
}

std::string dwfl_error_text() {
  int err = dwfl_errno();
  const char* msg = err != 0 ? dwfl_errmsg(err) : nullptr;
  return msg ? msg : "unknown libdwfl error";
}

// Opens path if it is a regular file (a FIFO or a device could block or
// have side effects) and, when inode is not 0, that inode.
int open_regular(const std::string& path, uint64_t inode) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (inode != 0 && st.st_ino != inode)) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

// One executable file (or [vdso]) of a process: what find_elf needs to open
// it. Module user data in libdwfl.
struct ModuleInfo {
  DwarfUnwinder::Process* process = nullptr;
  MapEntry first;  // its first mapping
  bool vdso = false;
};

struct DwarfUnwinder::Process {
  explicit Process(uint32_t p) : pid(p) {
    Elf64_Ehdr h = x86_64_ehdr();
    std::memcpy(arch_ehdr.data(), &h, sizeof h);
  }
  ~Process() {
    if (dwfl) dwfl_end(dwfl);  // before the images and infos it points at
    if (arch_elf) elf_end(arch_elf);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  uint32_t pid;
  std::string maps_text;
  bool reported = false;   // maps_text is what dwfl's modules say
  std::string maps_error;  // maps_text did not parse
  Dwfl* dwfl = nullptr;
  std::array<char, sizeof(Elf64_Ehdr)> arch_ehdr{};
  Elf* arch_elf = nullptr;
  bool attached = false;
  std::vector<std::unique_ptr<ModuleInfo>> modules;
  // Images handed to libdwfl as Elfs ([vdso] copies); live as long as dwfl.
  std::vector<std::unique_ptr<std::vector<char>>> images;

  // The sample being unwound (set only during unwind()).
  const UserRegs* regs = nullptr;
  const StackCopy* stack = nullptr;
  bool last_read_failed = false;
  uint64_t failed_read_addr = 0;
};

namespace {

using Process = DwarfUnwinder::Process;

// --- libdwfl callbacks: modules --------------------------------------------

int find_elf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr,
             char** file_name, Elf** elfp) {
  auto* info = static_cast<ModuleInfo*>(*userdata);
  if (!info) return -1;
  if (info->vdso) {
    const std::vector<char>& vdso = own_vdso();
    if (vdso.empty()) return -1;
    auto copy = std::make_unique<std::vector<char>>(vdso);
    Elf* elf = elf_memory(copy->data(), copy->size());
    if (!elf) return -1;
    info->process->images.push_back(std::move(copy));
    *elfp = elf;
    return -1;
  }

  // As ProcSymbolizer does: the file as the process sees it (containers)
  // while it lives; the path itself only if it is still the mapped inode
  // (an upgrade may have replaced it, and wrong CFI is worse than none); a
  // deleted file only through map_files.
  const MapEntry& m = info->first;
  uint32_t pid = info->process->pid;
  struct Candidate {
    std::string path;
    uint64_t inode;
  };
  std::vector<Candidate> candidates;
  std::string root = proc::live_proc_dir(pid) + "/root";
  if (!m.deleted) {
    candidates.push_back({root + m.path, 0});
    candidates.push_back({m.path, m.inode});
  }
  candidates.push_back(
      {fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end), 0});
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    int fd = open_regular(c.path, c.inode);
    if (fd < 0) continue;
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf || elf_kind(elf) != ELF_K_ELF || elf_cntl(elf, ELF_C_FDREAD)) {
      if (elf) elf_end(elf);
      close(fd);
      continue;
    }
    // Mapped (or read) whole: no descriptor kept per module and process.
    close(fd);
    // The name the .gnu_debuglink search starts from: the path itself
    // unless the process has a root of its own.
    std::string name = c.path;
    if (i == 0) {
      char buf[PATH_MAX];
      ssize_t n = readlink(root.c_str(), buf, sizeof buf);
      if (n == 1 && buf[0] == '/') name = m.path;
    }
    *file_name = strdup(name.c_str());
    *elfp = elf;
    return -1;
  }
  return -1;
}

// --- libdwfl callbacks: the one thread, its registers and stack -------------

pid_t next_thread(Dwfl*, void* arg, void** thread_argp) {
  if (*thread_argp != nullptr) return 0;
  *thread_argp = arg;
  return static_cast<pid_t>(static_cast<Process*>(arg)->pid);
}

bool get_thread(Dwfl*, pid_t, void* arg, void** thread_argp) {
  *thread_argp = arg;
  return true;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  auto* p = static_cast<Process*>(arg);
  const StackCopy* s = p->stack;
  if (s && addr >= s->addr && addr - s->addr <= s->bytes.size() &&
      s->bytes.size() - (addr - s->addr) >= sizeof(Dwarf_Word)) {
    std::memcpy(result, s->bytes.data() + (addr - s->addr), sizeof *result);
    p->last_read_failed = false;
    return true;
  }
  p->last_read_failed = true;
  p->failed_read_addr = addr;
  return false;
}

bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
  auto* p = static_cast<Process*>(arg);
  if (!p->regs) return false;
  std::array<Dwarf_Word, 17> regs;
  for (size_t i = 0; i < regs.size(); ++i) regs[i] = p->regs->dwarf[i];
  if (!dwfl_thread_state_registers(thread, 0, regs.size(), regs.data()))
    return false;
  dwfl_thread_state_register_pc(thread, regs[UserRegs::kRip]);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = nullptr,
    .thread_detach = nullptr,
};

// --- the walk ---------------------------------------------------------------

struct Walk {
  Process* process;
  std::vector<uint64_t>* frames;
  size_t max_frames;
  bool hit_max = false;
  bool repeated = false;
  uint64_t last_sp = 0;
  bool have_last_sp = false;
};

int on_frame(Dwfl_Frame* state, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  Dwarf_Addr pc;
  // No isactivation: asking for it unwinds the next frame early.
  if (!dwfl_frame_pc(state, &pc, nullptr)) return DWARF_CB_ABORT;
  if (w->frames->size() >= w->max_frames) {
    w->hit_max = true;
    return DWARF_CB_ABORT;
  }
  Dwarf_Word sp = 0;
  bool have_sp = dwfl_frame_reg(state, UserRegs::kRsp, &sp) == 0;
  // A frame identical to the one before it would repeat forever (CFI or
  // the frame-pointer fallback going nowhere).
  if (have_sp && w->have_last_sp && !w->frames->empty() &&
      w->frames->back() == pc && w->last_sp == sp) {
    w->repeated = true;
    return DWARF_CB_ABORT;
  }
  w->frames->push_back(pc);
  w->last_sp = sp;
  w->have_last_sp = have_sp;
  // Whether unwinding this frame reads outside the stack copy.
  w->process->last_read_failed = false;
  return DWARF_CB_OK;
}

}  // namespace

// --- DwarfUnwinder
// ------------------------------------------------------------

struct DwarfUnwinder::Callbacks {
  Dwfl_Callbacks dwfl{};
};

DwarfUnwinder::DwarfUnwinder(const char* debuginfo_path)
    : callbacks_(std::make_unique<Callbacks>()) {
  elf_version(EV_CURRENT);
  if (debuginfo_path) {
    debuginfo_path_ = debuginfo_path;
    has_debuginfo_path_ = true;
    debuginfo_path_ptr_ = debuginfo_path_.data();
  }
  Dwfl_Callbacks& cb = callbacks_->dwfl;
  cb.find_elf = find_elf;
  // By build-id under each absolute directory of the path, then by
  // .gnu_debuglink name (checked against the build-id, else the CRC).
  cb.find_debuginfo = dwfl_standard_find_debuginfo;
  cb.section_address = nullptr;
  cb.debuginfo_path = has_debuginfo_path_ ? &debuginfo_path_ptr_ : nullptr;
}

DwarfUnwinder::~DwarfUnwinder() = default;

void DwarfUnwinder::set_maps(uint32_t pid, const std::string& maps_text) {
  auto& p = procs_[pid];
  if (!p) p = std::make_unique<Process>(pid);
  if (p->reported && p->maps_text == maps_text) return;
  p->maps_text = maps_text;
  p->reported = false;
}

void DwarfUnwinder::forget(uint32_t pid) { procs_.erase(pid); }

DwarfUnwinder::Process* DwarfUnwinder::process(uint32_t pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : it->second.get();
}

namespace {

// Reports p's executable files as dwfl's modules. A file's mappings (with
// anonymous ones, its .bss, between them) make one module from where its
// offset 0 is (or would be) mapped to its last mapping's end: libdwfl takes
// the load bias from the module's start.
void report_modules(Process& p) {
  p.maps_error.clear();
  Result<std::vector<MapEntry>> parsed = proc::parse_maps(p.maps_text);
  std::vector<MapEntry> maps;
  if (parsed.ok())
    maps = std::move(parsed).value();
  else
    p.maps_error =
        fmt::format("maps of pid {}: {}", p.pid, parsed.status().message());

  std::vector<std::unique_ptr<ModuleInfo>> infos;
  dwfl_report_begin(p.dwfl);
  uint64_t reported_end = 0;
  auto report = [&](const MapEntry& first, uint64_t low, uint64_t high,
                    bool vdso) {
    if (low < reported_end || low >= high) return;  // overlap, nonsense
    Dwfl_Module* mod =
        dwfl_report_module(p.dwfl, first.path.c_str(), low, high);
    if (!mod) return;
    auto info = std::make_unique<ModuleInfo>();
    info->process = &p;
    info->first = first;
    info->vdso = vdso;
    // A module kept from the last report gets the new info too: the old
    // ones go away below.
    void** userdata = nullptr;
    dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr,
                     nullptr, nullptr);
    if (userdata) *userdata = info.get();
    infos.push_back(std::move(info));
    reported_end = high;
  };
  for (size_t i = 0; i < maps.size(); ++i) {
    const MapEntry& m = maps[i];
    if (m.path == "[vdso]") {
      if (own_vdso().size() == m.end - m.start) report(m, m.start, m.end, true);
      continue;
    }
    if (!m.is_file()) continue;
    uint64_t high = m.end;
    bool executable = m.executable();
    size_t last = i;
    for (size_t j = i + 1; j < maps.size(); ++j) {
      const MapEntry& e = maps[j];
      if (e.path.empty()) continue;
      if (e.path != m.path || e.inode != m.inode || e.dev != m.dev ||
          e.deleted != m.deleted)
        break;
      high = e.end;
      executable = executable || e.executable();
      last = j;
    }
    i = last;
    if (executable && m.pgoff <= m.start)
      report(m, m.start - m.pgoff, high, false);
  }
  dwfl_report_end(p.dwfl, nullptr, nullptr);
  p.modules = std::move(infos);
  p.reported = true;
}

// The Dwfl of p, its modules as p's maps say and its thread state attached;
// or the reason there is none.
std::string prepare(Process& p, const Dwfl_Callbacks& callbacks,
                    bool need_state) {
  if (!p.dwfl) {
    p.dwfl = dwfl_begin(&callbacks);
    if (!p.dwfl) return "dwfl_begin: " + dwfl_error_text();
  }
  if (!p.reported) report_modules(p);
  if (!p.maps_error.empty()) return p.maps_error;
  if (need_state && !p.attached) {
    if (!p.arch_elf) {
      p.arch_elf = elf_memory(p.arch_ehdr.data(), p.arch_ehdr.size());
      if (!p.arch_elf)
        return fmt::format("elf_memory: {}", elf_errmsg(elf_errno()));
    }
    if (!dwfl_attach_state(p.dwfl, p.arch_elf, static_cast<pid_t>(p.pid),
                           &kThreadCallbacks, &p))
      return "dwfl_attach_state: " + dwfl_error_text();
    p.attached = true;
  }
  return "";
}

}  // namespace

UnwindResult DwarfUnwinder::unwind(uint32_t pid, const UserRegs& regs,
                                   const StackCopy& stack, size_t max_frames) {
  UnwindResult r;
  uint64_t ip = regs.dwarf[UserRegs::kRip];
  auto fail = [&](std::string error) {
    if (ip != 0 && max_frames > 0 && r.frames.empty()) r.frames.push_back(ip);
    r.truncated = true;
    r.error = std::move(error);
    return std::move(r);
  };
  if (ip == 0) return fail("the instruction pointer is 0");
  if (max_frames == 0) return fail("max_frames is 0");
  Process* p = process(pid);
  if (!p) return fail(fmt::format("no maps for pid {}", pid));
  if (std::string error = prepare(*p, callbacks_->dwfl, true); !error.empty())
    return fail(std::move(error));

  Walk walk;
  walk.process = p;
  walk.frames = &r.frames;
  walk.max_frames = max_frames;
  r.frames.reserve(32);
  dwfl_errno();  // clear a stale error
  p->regs = &regs;
  p->stack = &stack;
  p->last_read_failed = false;
  int rc =
      dwfl_getthread_frames(p->dwfl, static_cast<pid_t>(pid), on_frame, &walk);
  p->regs = nullptr;
  p->stack = nullptr;
  // libdw ends a stack cleanly not only where the CFI says there is no
  // caller (_start, clone3) but also where the return address cannot be
  // read: when the last frame's unwinding read outside the stack copy, the
  // stack goes on beyond it.
  if (rc == 0 && !p->last_read_failed) return r;

  if (walk.hit_max)
    return fail(fmt::format("stopped after {} frames", max_frames));
  if (walk.repeated)
    return fail(fmt::format("frame {} repeats the one before it (0x{:x})",
                            r.frames.size(), r.frames.back()));
  std::string why = rc == 0 ? "" : dwfl_error_text();
  if (r.frames.empty()) return fail("unwinding failed: " + why);
  if (p->last_read_failed)
    why = fmt::format("0x{:x} is outside the stack copy (0x{:x}, {} bytes)",
                      p->failed_read_addr, stack.addr, stack.bytes.size());
  return fail(
      fmt::format("no caller found for 0x{:x}: {}", r.frames.back(), why));
}

std::string DwarfUnwinder::symbol_name(uint32_t pid, uint64_t addr) {
  Process* p = process(pid);
  if (!p || !prepare(*p, callbacks_->dwfl, false).empty()) return "";
  Dwfl_Module* mod = dwfl_addrmodule(p->dwfl, addr);
  if (!mod) return "";
  const char* name = dwfl_module_addrname(mod, addr);
  return name ? name : "";
}

}  // namespace looptrace
