// Thresholds and limits of a run, and the options that set the thresholds:
// declared once here, parsed by one set of rules for `record`, `report` and
// any later command (docs/looptrace.md OPTIONS). Every default is written
// here, once.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "looptrace/abi.h"

namespace looptrace {

// What the kernel filtered with and what the analysers judge by.
struct Thresholds {
  static constexpr uint64_t kSlowNs = 16'000'000;  // one 60 Hz frame
  static constexpr uint64_t kSlowInputNs = 100'000'000;
  static constexpr uint64_t kBarrierStallNs = 3'000'000'000;  // WeChat's 3 s
  // A span running this long is announced while it runs (Matrix's lag
  // threshold; Android's input ANR is 5 s).
  static constexpr uint64_t kHangNs = 2'000'000'000;
  // --delivery-hysteresis: after a slow delivery, none is reported on that
  // thread until the lag drains below this (Android's Looper).
  static constexpr uint64_t kDeliveryDrainNs = 10'000'000;
  static constexpr uint32_t kSampleHz = 1000;
  static constexpr uint32_t kRingbufBytes = 8u << 20;
  static constexpr uint32_t kHistMax = 4096;  // threads x probes
  // Messages enqueued and not yet dispatched (lt_pending).
  static constexpr uint32_t kPendingMax = 65536;
  // Processes followed with -p or a command (lt_tgids).
  static constexpr uint32_t kProcessMax = 4096;
  // --refresh-rate: frames are timed against 60 Hz (1e9 / 60, rounded)
  // unless the toolkit says otherwise.
  static constexpr uint32_t kRefreshHz = 60;
  static constexpr uint64_t kRefreshNs = 16'666'667;

  // A span of role r is slow iff its duration >= slow_ns[r].
  std::array<uint64_t, LT_ROLE_MAX> slow_ns{kSlowNs, kSlowNs, kSlowNs};
  uint64_t sample_after_ns = kSlowNs / 2;
  uint32_t sample_hz = kSampleHz;         // 0: no stack sampling
  bool record_all = false;                // every span crossed the ring buffer
  uint64_t delivery_drain_ns = 0;         // 0: every slow delivery is reported
  uint64_t slow_input_ns = kSlowInputNs;  // input events get a blame
  uint64_t barrier_stall_ns = kBarrierStallNs;  // a barrier held this long
  // A frame's refresh interval when its toolkit does not say (analysis only:
  // a report may change it freely).
  uint64_t refresh_ns = kRefreshNs;
};

// The threshold options, in the order of kThresholdOptions.
enum class ThresholdOption {
  kSlow,
  kSlowIdle,
  kSlowDelivery,
  kSlowInput,
  kBarrierStall,
  kRefreshRate,
  kCount,
};
inline constexpr size_t kThresholdOptionCount =
    static_cast<size_t>(ThresholdOption::kCount);

// What an option's value is: a duration with a unit ("16ms"), or a rate in
// Hz ("60", "59.94") that stands for its interval.
enum class ThresholdUnit { kDuration, kHz };

struct ThresholdOptionInfo {
  ThresholdOption id;
  const char* flag;  // "--slow"
  const char* help;  // without the default
  // The default in record (a duration; for a rate, its interval), or for
  // --slow-idle "--slow".
  uint64_t default_ns;
  ThresholdUnit unit = ThresholdUnit::kDuration;
};
extern const std::array<ThresholdOptionInfo, kThresholdOptionCount>
    kThresholdOptions;

// The default as help and docs show it: "16.0ms", "60Hz", or "--slow".
std::string threshold_default_text(ThresholdOption o);

// The options as typed; empty: not given.
struct ThresholdArgs {
  std::array<std::string, kThresholdOptionCount> text;
  std::string& operator[](ThresholdOption o) {
    return text[static_cast<size_t>(o)];
  }
  const std::string& operator[](ThresholdOption o) const {
    return text[static_cast<size_t>(o)];
  }
};

// --refresh-rate's value: "60", "59.94" or "144Hz", 1 to 1000 Hz, as the
// interval in ns (rounded). A usage error naming the option otherwise.
Result<uint64_t> parse_refresh_rate(const std::string& text);

// Thresholds given on the command line; nullopt: not given.
struct ThresholdOverrides {
  std::array<std::optional<uint64_t>, LT_ROLE_MAX> slow_ns;
  std::optional<uint64_t> slow_input_ns;
  std::optional<uint64_t> barrier_stall_ns;
  std::optional<uint64_t> refresh_ns;  // --refresh-rate, as its interval
  // --slow-idle was not given but --slow was: the idle threshold follows
  // --slow (slow_ns[LT_ROLE_IDLE] holds it).
  bool idle_from_slow = false;
};

// Every given value a duration above 0 (--refresh-rate: a rate in Hz, 1 to
// 1000); a usage error naming the option ("--slow-idle: ...") otherwise.
// --slow-idle defaults to --slow.
Result<ThresholdOverrides> parse_thresholds(const ThresholdArgs& args);

// --hang: a duration, or 0 (bare or with a unit) for no hang watchdog
// (returns 0). A usage error naming --hang otherwise.
Result<uint64_t> parse_hang(const std::string& text);

// record: the defaults with the given thresholds.
Thresholds thresholds_for_record(const ThresholdOverrides& o);

// report: the recorded thresholds, raised. A usage error naming the option
// when one is below what the recording could have seen; an idle threshold
// that only followed --slow stays at the recorded one rather than fall
// below it.
Result<Thresholds> apply_overrides(const Thresholds& recorded,
                                   const ThresholdOverrides& o);

}  // namespace looptrace
