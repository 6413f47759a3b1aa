#include "elf/call_sites.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "elf/elf_file.h"
#include "elf/resolve.h"

namespace looptrace::elf {
namespace {

// How far before a call its vtable load may be (AOSP: 2 instructions).
constexpr size_t kWindow = 8;
// A function larger than this is not decoded (no dispatch loop is).
constexpr uint64_t kMaxFunctionBytes = 1 << 20;

// The 64-bit register a general-purpose register is part of (a write to
// %edi is one to %rdi); others as they are.
x86_reg full(unsigned reg) {
  static const x86_reg kFamilies[][5] = {
      {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH},
      {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH},
      {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
      {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
      {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_SIL},
      {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_DIL},
      {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_BPL},
      {X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_SPL},
      {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_R8B},
      {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_R9B},
      {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_R10B},
      {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_R11B},
      {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_R12B},
      {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_R13B},
      {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_R14B},
      {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_R15B}};
  for (const auto& f : kFamilies)
    if (std::find(std::begin(f), std::end(f), reg) != std::end(f)) return f[0];
  return static_cast<x86_reg>(reg);
}

struct Decoder {
  csh handle = 0;
  bool ok = false;
  Decoder() {
    ok = cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK &&
         cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON) == CS_ERR_OK;
  }
  ~Decoder() {
    if (handle) cs_close(&handle);
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Whether instruction `in` writes (any part of) 64-bit register `reg`.
  bool writes(const cs_insn& in, x86_reg reg) const {
    cs_regs read, written;
    uint8_t nread = 0, nwritten = 0;
    if (cs_regs_access(handle, &in, read, &nread, written, &nwritten) !=
        CS_ERR_OK)
      return true;  // unknown: assume the worst
    for (uint8_t k = 0; k < nwritten; ++k)
      if (full(written[k]) == reg) return true;
    return false;
  }
};

// `n` bytes of code at `vaddr` decoded (at most `max` instructions, 0:
// all), freed with it; none when capstone cannot be opened.
struct Disassembly {
  Decoder d;
  cs_insn* insns = nullptr;
  size_t count = 0;
  Disassembly(const uint8_t* code, size_t n, uint64_t vaddr, size_t max = 0) {
    if (d.ok && n != 0)
      count = cs_disasm(d.handle, code, n, vaddr, max, &insns);
  }
  ~Disassembly() {
    if (insns) cs_free(insns, count);
  }
  Disassembly(const Disassembly&) = delete;
  Disassembly& operator=(const Disassembly&) = delete;
};

// `mov REG64, qword ptr [BASE]`: its BASE, if `in` is one loading `reg`.
x86_reg load_from(const cs_insn& in, x86_reg reg) {
  const cs_x86& x = in.detail->x86;
  if (in.id != X86_INS_MOV || x.op_count != 2) return X86_REG_INVALID;
  const cs_x86_op& dst = x.operands[0];
  const cs_x86_op& src = x.operands[1];
  if (dst.type != X86_OP_REG || dst.reg != reg || dst.size != 8 ||
      src.type != X86_OP_MEM || src.mem.index != X86_REG_INVALID ||
      src.mem.disp != 0 || src.mem.segment != X86_REG_INVALID ||
      src.mem.base == X86_REG_RIP || src.mem.base == X86_REG_INVALID)
    return X86_REG_INVALID;
  return static_cast<x86_reg>(src.mem.base);
}

// `mov %rdi, %FROM` (64-bit register to register).
bool moves_to_rdi(const cs_insn& in, x86_reg from) {
  const cs_x86& x = in.detail->x86;
  return in.id == X86_INS_MOV && x.op_count == 2 &&
         x.operands[0].type == X86_OP_REG && x.operands[0].reg == X86_REG_RDI &&
         x.operands[1].type == X86_OP_REG && x.operands[1].reg == from;
}

// Whether the call at insns[i], through [base + disp], is a virtual call:
// base loaded from [obj] within kWindow instructions before, base not
// written since, and %rdi holding obj at the call.
bool is_virtual(const Decoder& d, const cs_insn* insns, size_t i,
                x86_reg base) {
  const size_t from = i > kWindow ? i - kWindow : 0;
  for (size_t j = i; j-- > from;) {
    const x86_reg obj = load_from(insns[j], base);
    if (obj == X86_REG_INVALID) {
      if (d.writes(insns[j], base)) return false;  // base came from elsewhere
      continue;
    }
    // `this` is obj: %rdi itself, untouched since the load ...
    auto rdi_kept_after = [&](size_t k) {
      for (size_t m = k + 1; m < i; ++m)
        if (d.writes(insns[m], X86_REG_RDI)) return false;
      return true;
    };
    if (obj == X86_REG_RDI) return rdi_kept_after(j);
    // ... or copied into %rdi (before or after the load) and kept.
    for (size_t k = from; k < i; ++k) {
      if (k == j || !moves_to_rdi(insns[k], obj) || !rdi_kept_after(k))
        continue;
      bool obj_kept = true;
      for (size_t m = std::min(j, k) + 1; m < std::max(j, k); ++m)
        obj_kept = obj_kept && !d.writes(insns[m], obj);
      if (obj_kept) return true;
    }
    return false;
  }
  return false;
}

}  // namespace

std::vector<CallSite> virtual_calls(const uint8_t* code, size_t n,
                                    uint64_t vaddr) {
  std::vector<CallSite> out;
  const Disassembly dis(code, n, vaddr);
  const Decoder& d = dis.d;
  const cs_insn* raw = dis.insns;
  for (size_t i = 0; i < dis.count; ++i) {
    const cs_insn& in = raw[i];
    if (in.id != X86_INS_CALL || in.detail->x86.op_count != 1) continue;
    const cs_x86_op& op = in.detail->x86.operands[0];
    if (op.type != X86_OP_MEM || op.mem.index != X86_REG_INVALID ||
        op.mem.segment != X86_REG_INVALID || op.mem.base == X86_REG_RIP ||
        op.mem.base == X86_REG_INVALID || op.mem.base == X86_REG_RSP)
      continue;
    if (!is_virtual(d, raw, i, static_cast<x86_reg>(op.mem.base))) continue;
    CallSite s;
    for (size_t j = i, from = i > kWindow ? i - kWindow : 0; j-- > from;) {
      const cs_x86& x = raw[j].detail->x86;
      if (!d.writes(raw[j], X86_REG_RSI)) continue;
      if (x.op_count >= 1 && x.operands[0].type == X86_OP_REG &&
          full(x.operands[0].reg) == X86_REG_RSI)
        s.arg1_bits = x.operands[0].size * 8;
      break;
    }
    s.vaddr = in.address;
    s.length = in.size;
    s.slot = op.mem.disp;
    s.text = fmt::format("{} {}", in.mnemonic, in.op_str);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<CallSite> direct_calls(const uint8_t* code, size_t n,
                                   uint64_t vaddr) {
  std::vector<CallSite> out;
  const Disassembly dis(code, n, vaddr);
  for (size_t i = 0; i < dis.count; ++i) {
    const cs_insn& in = dis.insns[i];
    if (in.id != X86_INS_CALL || in.detail->x86.op_count != 1 ||
        in.detail->x86.operands[0].type != X86_OP_IMM)
      continue;
    CallSite s;
    s.vaddr = in.address;
    s.length = in.size;
    s.target = static_cast<uint64_t>(in.detail->x86.operands[0].imm);
    s.text = fmt::format("{} {}", in.mnemonic, in.op_str);
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::string> plt_target(const ElfFile& file, uint64_t vaddr) {
  // A stub is `jmp *SLOT(%rip)` first (lazy .plt), or after `endbr64`
  // (.plt.sec, IBT) and with a `bnd` prefix (MPX builds).
  uint8_t code[16];
  if (!file.read_bytes(vaddr, code, sizeof(code)).ok()) return std::nullopt;
  const Disassembly dis(code, sizeof(code), vaddr, 2);
  std::optional<std::string> out;
  for (size_t i = 0; i < dis.count && !out; ++i) {
    const cs_insn& in = dis.insns[i];
    if (in.id == X86_INS_ENDBR64) continue;
    const cs_x86& x = in.detail->x86;
    if (in.id != X86_INS_JMP || x.op_count != 1 ||
        x.operands[0].type != X86_OP_MEM ||
        x.operands[0].mem.base != X86_REG_RIP ||
        x.operands[0].mem.index != X86_REG_INVALID)
      break;
    out = file.imported_at(in.address + in.size +
                           static_cast<uint64_t>(x.operands[0].mem.disp));
  }
  return out;
}

namespace {

// Function m's code; errors: no size, unreadable.
Result<std::vector<uint8_t>> function_code(const ElfFile& file,
                                           const SymbolMatch& m) {
  const std::string name = m.demangled.empty() ? m.name : m.demangled;
  if (m.size == 0 || m.size > kMaxFunctionBytes)
    return Status::Error(
        fmt::format("{}: {} has no size in its symbol table (or {} bytes): "
                    "its calls cannot be decoded",
                    file.path(), name, m.size),
        ErrorKind::kUsage);
  std::vector<uint8_t> code(m.size);
  Status st = file.read_bytes(m.vaddr, code.data(), code.size());
  if (!st.ok()) return st;
  return code;
}

}  // namespace

Result<std::vector<CallSite>> virtual_calls(const ElfFile& file,
                                            const SymbolMatch& m) {
  auto code = function_code(file, m);
  if (!code.ok()) return code.status();
  return virtual_calls(code->data(), code->size(), m.vaddr);
}

Result<std::vector<CallSite>> calls_to(const ElfFile& file,
                                       const SymbolMatch& m,
                                       const std::string& callee) {
  auto code = function_code(file, m);
  if (!code.ok()) return code.status();
  std::vector<CallSite> out;
  std::map<uint64_t, bool> is_callee;  // per target, decoded once
  for (CallSite& c : direct_calls(code->data(), code->size(), m.vaddr)) {
    auto [it, added] = is_callee.try_emplace(c.target, false);
    if (added) {
      const Symbol* s = file.find_symbol_by_vaddr(c.target);
      it->second =
          (s && s->vaddr == c.target &&
           (s->name == callee || s->demangled == callee)) ||
          plt_target(file, c.target) == std::optional<std::string>(callee);
    }
    if (it->second) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace looptrace::elf
