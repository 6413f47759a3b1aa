// A probe point as the loader attaches it and the report describes it.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "looptrace/abi.h"

namespace looptrace {

// How a key value is shown in a report.
enum class KeyFormat {
  kInt,      // signed decimal ("what=3")
  kHex,      // 0x...
  kSymbol,   // a code pointer: symbolized to a function name
  kVtable,   // a vtable pointer: symbolized, "vtable for " stripped -> class
  kPointer,  // an object's address (a message, a queue): in JSON, not in
             // the one-line target
  kEnum,     // a number named by the key's table (QEvent::Type 1 -> Timer);
             // a number the table lacks is shown in decimal
  kString,   // a pointer to a NUL-terminated string (a GSource's name),
             // read at the span's end, at most LT_KEY_STR_LEN - 1 bytes
  kPyFunc,   // a Python callable (function, bound method): its code object
             // read in the kernel, named "qualname (file:line)"; in the
             // one-line target it stands for the callback key it names
};

// What a key means to looptrace itself, beyond being shown. Set once, from
// the key's well-known name, where keys are read (a profile, --key, a
// recording: key_role_for); nothing after that compares key names.
enum class KeyRole : uint8_t {
  kShown,      // only shown: what ran ("target", "what", ...)
  kQueue,      // "queue": the queue of a barrier or enqueue probe
  kMessage,    // "msg": pairs an enqueue with the dispatch of its message
  kMsgTag,     // "msg_tag": with msg, for a loop that dispatches a copy
  kWhen,       // "when": an enqueued message's due time (CLOCK_MONOTONIC ns)
  kFlags,      // "flags": an enqueued message's flags (async: async_mask)
  kToken,      // "token": the barrier a barrier.remove removes
  kDueUs,      // "due_us": a dispatch's due time (CLOCK_MONOTONIC us): its
  kDueNs,      // "due_ns":   delivery lag is reported, the value not shown
  kRefreshNs,  // "refresh_ns": a frame's refresh interval, as its toolkit
               // says (ns; Choreographer's frame interval), not shown
};

KeyRole key_role_for(std::string_view name);

// A dispatch's due-time key: its unit in ns; 0 for any other key.
inline uint32_t due_scale(KeyRole r) {
  return r == KeyRole::kDueUs ? 1000 : r == KeyRole::kDueNs ? 1 : 0;
}

struct KeyDef {
  std::string name;  // "target", "callback", "what"
  std::string expr;  // as written: "*(*(arg1+0))"
  lt_key_spec spec{};
  KeyFormat format = KeyFormat::kHex;
  // kEnum: the name of each value (profiles' "names").
  std::map<int64_t, std::string> names;
  KeyRole role = KeyRole::kShown;  // key_role_for(name)
};

// A profile that reads structures a library may change between versions
// states the versions it was checked against; the library's own version,
// read from the file (exported `const unsigned` variables), must be one.
struct VersionGate {
  std::string binary;  // the library it applies to, as probes name it
  std::string name;    // "GLib", for messages
  std::string major;   // symbols holding the version: glib_major_version
  std::string minor;
  std::vector<std::string> checked;  // "2.74"
};

struct ProbeDef {
  uint32_t id = 0;  // index into lt_config.probes and the attach cookie
  uint32_t role = LT_ROLE_DISPATCH;
  std::string binary;  // as given: path or library name
  std::string symbol;  // as given: name, glob or 0x offset
  // What the report calls the probe's spans, before their keys ("GLib
  // timeout"); empty: the keys alone, or the symbol.
  std::string label;
  // The profile it comes from ("glib"; a profile file's name); empty for
  // --dispatch and the like.
  std::string profile;
  std::vector<KeyDef> keys;
  // Filled in by resolution:
  std::string path;             // absolute path of the ELF file
  std::string resolved_symbol;  // demangled name of the match
  uint64_t file_offset = 0;     // what the uprobe attaches at
  // A call site's: its return address's file offset, where the exit's
  // uprobe attaches; 0 for a function (a uretprobe).
  uint64_t return_offset = 0;
  uint32_t async_mask = 0;  // enqueue: flags bits of an async message
  // input.recv/input.send: arg1 is a struct msghdr * (recvmsg-like), not
  // the buffer itself.
  bool msghdr = false;
  // Spans only: a call made while another span of this probe runs on the
  // thread is part of that one, not a span (Qt's notify nests for events
  // sent from a handler).
  bool outermost = false;
  // Spans only: the key (index + 1; 0: none) without which a call is no
  // span (profiles' "only_if"): GObject closures are spans only where
  // the closure's callable is a Python function.
  uint32_t only_if = 0;
  // Spans only: the virtual calls the function `symbol` makes instead of
  // the function itself (profiles' "call"): each call through vtable
  // offset `slot` (any: -1) a span, from its call instruction to the one
  // after it (two plain uprobes). AOSP's Looper dispatches each message as
  // handler->handleMessage(message), a call inside pollInner.
  struct CallMatch {
    int64_t slot = -1;
    // The width of the argument after `this` as the call site sets it
    // (64: a pointer, 32: an int; 0: any): tells AOSP's handleMessage
    // (const Message&) from handleEvent(int fd, ...), both slot 0x10.
    int arg1_bits = 0;
    // The call's offset in the function (--dispatch-call FUNCTION+N);
    // -1: every call that matches.
    int64_t at = -1;
    // Not empty: the direct calls to the function of this name instead
    // (`call epoll_wait@plt` in AOSP's pollInner), not virtual calls.
    std::string to;
  };
  std::optional<CallMatch> call;
  // A dispatch that handles a display server's input events (profiles'
  // "input"): which keys say the event's type and its server time, and
  // which type values are input of which kind. Such a span is recorded
  // whatever its length, and consumes the event it matches.
  struct InputMatch {
    uint32_t type_key = 0;                 // key index + 1
    uint32_t time_key = 0;                 // key index + 1; 0: match by order
    std::map<int64_t, std::string> kinds;  // value -> "key_press", ...
  };
  std::optional<InputMatch> input;
  // Spans that draw a frame (profiles' "frame"; analysis/frames.h): every
  // span of the probe, or those whose string key (format str) is one of
  // `names` (GTK's frame-clock GSource). Recorded whatever their length; a
  // due-time key (KeyRole kDueUs, kDueNs) is their tick.
  struct FrameMatch {
    std::vector<std::string> names;  // at most LT_FRAME_NAMES
    // Key indexes + 1 whose values decide the name ("by"; at most
    // LT_FRAME_BY): the kernel matches the name once per distinct values
    // on a thread. The kernel's alone: not recorded.
    std::vector<uint32_t> by = {};
    // Each call's return ends a frame (--frame-end: a buffer swap, a
    // commit): the frame runs from the thread's previous such return.
    bool end = false;
  };
  std::optional<FrameMatch> frame;
  // A phase of the frames of its thread (a profile's "phase": true): each
  // span is recorded whatever its length, and a frame lists the phase
  // spans that ran inside it, named by their targets.
  bool phase = false;
  // Set when the probe's binary is one its profile's version gate names.
  std::optional<VersionGate> gate;
  // Filled in by resolution when gated: "GLib 2.74".
  std::string version;
};

}  // namespace looptrace
