#include "profiles/key_expr.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <vector>

#include "base/log.h"

namespace looptrace {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Status error(std::string_view what) const {
    // A long expression is cut: the column says where the problem is.
    constexpr size_t kShown = 60;
    std::string shown(s_.substr(0, kShown));
    if (s_.size() > kShown) shown += "...";
    return Status::Error(fmt::format("bad key expression '{}': {} at column {}",
                                     shown, what, pos_ + 1),
                         ErrorKind::kUsage);
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           std::isspace(static_cast<unsigned char>(s_[pos_])))
      ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool at_end() {
    skip_ws();
    return pos_ >= s_.size();
  }
  bool eat_word(std::string_view w) {
    skip_ws();
    if (s_.substr(pos_, w.size()) == w) {
      size_t end = pos_ + w.size();
      if (end < s_.size() &&
          (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
        return false;
      pos_ = end;
      return true;
    }
    return false;
  }

  // Parses "+N" / "-N" if present into *off.
  Status offset(int64_t* off) {
    *off = 0;
    skip_ws();
    if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-'))
      return Status::Ok();
    bool neg = s_[pos_] == '-';
    ++pos_;
    skip_ws();
    int base = 10;
    if (s_.substr(pos_, 2) == "0x" || s_.substr(pos_, 2) == "0X") {
      base = 16;
      pos_ += 2;
    }
    uint64_t v = 0;
    auto [p, ec] =
        std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v, base);
    // INT32_MIN is "-2147483648": its magnitude is one more than INT32_MAX
    // (format_key_expr writes it so).
    const uint64_t limit = neg ? uint64_t{INT32_MAX} + 1 : uint64_t{INT32_MAX};
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc() && v > limit))
      return error(
          "offset out of range (a key offset is a signed 32-bit "
          "value)");
    if (ec != std::errc() || p == s_.data() + pos_)
      return error("expected a number");
    pos_ = p - s_.data();
    *off = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return Status::Ok();
  }

  // TERM, appending dereference offsets to spec; *pending is the offset
  // added after the last dereference.
  // Without parentheses '*' binds tighter than '+', as in C: "*arg1+8" is
  // (*arg1)+8.
  Status term(lt_key_spec* spec, int64_t* pending, bool allow_offset = true) {
    // Every '*' and '(' recurses once; a bound keeps a hostile expression
    // ("((((...") from exhausting the stack.
    if (depth_ >= kMaxNesting)
      return error(fmt::format("nested deeper than {} levels", kMaxNesting));
    ++depth_;
    Status st = term_at_depth(spec, pending, allow_offset);
    --depth_;
    return st;
  }

 private:
  // More than a sensible expression needs: three dereferences with
  // parentheses around each are nine levels.
  static constexpr int kMaxNesting = 32;

  // A dereference's offset and the final addition are __s32 fields of
  // lt_key_spec: a sum outside that range must not wrap.
  Status check_range(int64_t v) const {
    if (v < INT32_MIN || v > INT32_MAX)
      return error(
          fmt::format("offset {} out of range (a key offset is a "
                      "signed 32-bit value)",
                      v));
    return Status::Ok();
  }

  Status term_at_depth(lt_key_spec* spec, int64_t* pending, bool allow_offset) {
    if (eat('*')) {
      int64_t inner = 0;
      if (eat('(')) {
        LT_RETURN_IF_ERROR(term(spec, &inner));
        if (!eat(')')) return error("expected ')'");
      } else {
        LT_RETURN_IF_ERROR(term(spec, &inner, false));
      }
      if (spec->nderef >= LT_MAX_DEREF)
        return error(fmt::format("more than {} dereferences", LT_MAX_DEREF));
      LT_RETURN_IF_ERROR(check_range(inner));
      spec->off[spec->nderef++] = static_cast<int32_t>(inner);
      return allow_offset ? offset(pending) : Status::Ok();
    }
    if (eat('(')) {
      LT_RETURN_IF_ERROR(term(spec, pending));
      if (!eat(')')) return error("expected ')'");
      int64_t more = 0;
      LT_RETURN_IF_ERROR(offset(&more));
      *pending += more;
      return check_range(*pending);
    }
    if (spec->base != LT_KEY_NONE) return error("two bases");
    if (eat_word("sp")) {
      spec->base = LT_KEY_SP;
    } else {
      bool found = false;
      for (int i = 0; i <= LT_KEY_ARG5 - LT_KEY_ARG0; ++i) {
        if (eat_word(fmt::format("arg{}", i))) {
          spec->base = static_cast<__u8>(LT_KEY_ARG0 + i);
          found = true;
          break;
        }
      }
      if (!found) return error("expected arg0..arg5, sp or '*'");
    }
    return allow_offset ? offset(pending) : Status::Ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<lt_key_spec> parse_key_expr(std::string_view text) {
  lt_key_spec spec{};
  Parser p(text);
  uint8_t size = 0;
  if (p.eat_word("u8"))
    size = 1;
  else if (p.eat_word("u16"))
    size = 2;
  else if (p.eat_word("u32"))
    size = 4;
  else if (p.eat_word("u64"))
    size = 8;
  int64_t add = 0;
  LT_RETURN_IF_ERROR(p.term(&spec, &add));
  if (!p.at_end()) return p.error("unexpected text");
  if (size && size != 8 && spec.nderef == 0)
    return p.error("a width needs a dereference");
  if (add < INT32_MIN || add > INT32_MAX)
    return p.error(
        fmt::format("offset {} out of range (a key offset is a "
                    "signed 32-bit value)",
                    add));
  spec.add = static_cast<int32_t>(add);
  spec.size = size == 8 ? 0 : size;
  return spec;
}

std::string format_key_expr(const lt_key_spec& spec) {
  std::string s;
  if (spec.base == LT_KEY_SP)
    s = "sp";
  else if (spec.base >= LT_KEY_ARG0 && spec.base <= LT_KEY_ARG5)
    s = fmt::format("arg{}", spec.base - LT_KEY_ARG0);
  else
    s = "?";
  for (int i = 0; i < spec.nderef && i < LT_MAX_DEREF; ++i) {
    if (spec.off[i] > 0)
      s = fmt::format("*({}+{})", s, spec.off[i]);
    else if (spec.off[i] < 0)
      s = fmt::format("*({}-{})", s, -static_cast<int64_t>(spec.off[i]));
    else
      s = fmt::format("*({})", s);
  }
  if (spec.add > 0) s += fmt::format("+{}", spec.add);
  if (spec.add < 0) s += fmt::format("-{}", -static_cast<int64_t>(spec.add));
  // fmt, not "u8 " + s: GCC 12 -O3 misreads that as an overlapping copy.
  if (spec.size == 1 || spec.size == 2 || spec.size == 4)
    return fmt::format("u{} {}", spec.size * 8, s);
  return s;
}

Result<KeyFormat> parse_key_format(std::string_view text) {
  if (text == "int") return KeyFormat::kInt;
  if (text == "hex") return KeyFormat::kHex;
  if (text == "sym" || text == "symbol") return KeyFormat::kSymbol;
  if (text == "vtable" || text == "class") return KeyFormat::kVtable;
  if (text == "ptr" || text == "pointer") return KeyFormat::kPointer;
  if (text == "enum") return KeyFormat::kEnum;
  if (text == "str" || text == "string") return KeyFormat::kString;
  if (text == "pyfunc") return KeyFormat::kPyFunc;
  return Status::Error(
      fmt::format("bad key format '{}': expected int, hex, sym, vtable, ptr, "
                  "enum, str or pyfunc",
                  log::printable(text, 60)),
      ErrorKind::kUsage);
}

const char* key_format_name(KeyFormat f) {
  switch (f) {
    case KeyFormat::kInt:
      return "int";
    case KeyFormat::kHex:
      return "hex";
    case KeyFormat::kSymbol:
      return "sym";
    case KeyFormat::kVtable:
      return "vtable";
    case KeyFormat::kPointer:
      return "ptr";
    case KeyFormat::kEnum:
      return "enum";
    case KeyFormat::kString:
      return "str";
    case KeyFormat::kPyFunc:
      return "pyfunc";
  }
  return "hex";
}

Result<KeyDef> parse_key_def(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Status::Error(
        fmt::format("bad key '{}': expected NAME=EXPR[:FORMAT]", text),
        ErrorKind::kUsage);
  KeyDef def;
  def.name = std::string(text.substr(0, eq));
  def.role = key_role_for(def.name);
  std::string_view rest = text.substr(eq + 1);
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    auto fmt_res = parse_key_format(rest.substr(colon + 1));
    if (!fmt_res.ok()) return fmt_res.status();
    if (*fmt_res == KeyFormat::kEnum)
      return Status::Error(
          fmt::format("bad key '{}': enum needs a table of names, which "
                      "only a profile gives (docs/profiles.md)",
                      log::printable(text, 60)),
          ErrorKind::kUsage);
    def.format = *fmt_res;
    rest = rest.substr(0, colon);
  }
  auto spec = parse_key_expr(rest);
  if (!spec.ok()) return spec.status();
  def.expr = std::string(rest);
  def.spec = *spec;
  return def;
}

}  // namespace looptrace
