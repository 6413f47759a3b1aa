// Key expressions: what a span's entry reads to say what ran.
//
//   EXPR  := [TYPE ' '] TERM
//   TERM  := BASE | BASE ('+'|'-') NUM | '*' '(' TERM ')' | '*' TERM
//            | '*' '(' TERM ')' ('+'|'-') NUM
//   BASE  := arg0 .. arg5 | sp
//   TYPE  := u8 | u16 | u32 | u64   (width of the last read; default u64)
//
// "*(*(arg1+0))" reads the pointer at arg1+0, then the word it points to (a
// vtable pointer); "u32 *(arg1+16)" reads a 32-bit field.
#pragma once

#include <linux/types.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "looptrace/abi.h"
#include "model/probe.h"

namespace looptrace {

Result<lt_key_spec> parse_key_expr(std::string_view text);
// Canonical text of a spec (for --help output and error messages).
std::string format_key_expr(const lt_key_spec& spec);

Result<KeyFormat> parse_key_format(std::string_view text);
const char* key_format_name(KeyFormat f);

// "NAME=EXPR[:FORMAT]", as given to --key.
Result<KeyDef> parse_key_def(std::string_view text);

}  // namespace looptrace
