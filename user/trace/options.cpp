#include "trace/options.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

namespace looptrace {

Result<SyscallHook> syscall_hook_from_env() {
  const char* v = std::getenv("LOOPTRACE_SYSCALL_HOOK");
  if (!v || !*v) return SyscallHook::kAuto;
  std::string_view s(v);
  if (s == "raw") return SyscallHook::kRaw;
  if (s == "tracepoint") return SyscallHook::kTracepoint;
  return Status::Error(
      fmt::format("LOOPTRACE_SYSCALL_HOOK={}: expected raw or tracepoint", s),
      ErrorKind::kUsage);
}

std::optional<uint32_t> input_call_op(const std::string& name) {
  if (name == "recv" || name == "recvfrom" || name == "read") return 0u;
  if (name == "send" || name == "sendto" || name == "write") return LT_IO_SEND;
  if (name == "recvmsg") return LT_IO_MSGHDR;
  if (name == "sendmsg") return LT_IO_SEND | LT_IO_MSGHDR;
  if (name == "readv") return LT_IO_IOV;
  if (name == "writev") return LT_IO_SEND | LT_IO_IOV;
  return std::nullopt;
}

}  // namespace looptrace
