// Names a traced process or a recording supplies (thread names, ELF symbols,
// perf-map lines, the strings `str` keys point to, mapping paths) are bytes,
// not text: any of them may hold a control byte or be invalid UTF-8. These
// make them safe where they go: printable() for a terminal or a log line,
// cut_name() for a length bound; JSON goes through json_text()
// (base/json_text.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace looptrace {

// The mark a name cut at a length bound ends with: U+2026 "…".
inline constexpr std::string_view kCutMark = "\xe2\x80\xa6";

// s with what a terminal would act on escaped: NUL as \0, newline as \n,
// tab as \t, the other C0 controls and DEL as \xNN (ESC[2J prints as
// \x1b[2J), the C1 controls and the bidirectional overrides as \uNNNN, and
// each byte of an invalid UTF-8 sequence as \xNN; the rest as it is. Cut
// to max_len bytes of s (never inside a character), then "..." follows.
std::string printable(std::string_view s, size_t max_len = SIZE_MAX);

// The longest prefix of s of at most max_bytes that does not end inside a
// UTF-8 character (invalid bytes count as characters of one byte).
std::string_view utf8_prefix(std::string_view s, size_t max_bytes);

// s if it has at most max_bytes; else its longest prefix (never ending
// inside a character) that leaves room for kCutMark, and the mark.
// max_bytes must exceed kCutMark's length.
std::string cut_name(std::string_view s, size_t max_bytes);

}  // namespace looptrace
