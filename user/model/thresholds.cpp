#include "model/thresholds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "base/duration.h"

namespace looptrace {

const std::array<ThresholdOptionInfo, kThresholdOptionCount> kThresholdOptions =
    {{
        {ThresholdOption::kSlow, "--slow", "Slow-dispatch threshold",
         Thresholds::kSlowNs},
        {ThresholdOption::kSlowIdle, "--slow-idle",
         "Slow idle-handler threshold", 0},
        {ThresholdOption::kSlowDelivery, "--slow-delivery",
         "Slow delivery: dispatch start minus due time (profiles with an "
         "enqueue role)",
         Thresholds::kSlowNs},
        {ThresholdOption::kSlowInput, "--slow-input",
         "Name the dispatches an input event waited behind when it took this "
         "long from arrival to consumption",
         Thresholds::kSlowInputNs},
        {ThresholdOption::kBarrierStall, "--barrier-stall",
         "A sync barrier held this long is a stall, announced live",
         Thresholds::kBarrierStallNs},
        {ThresholdOption::kRefreshRate, "--refresh-rate",
         "Display refresh rate in Hz that frames are timed against when "
         "the toolkit does not say",
         Thresholds::kRefreshNs, ThresholdUnit::kHz},
    }};

namespace {

const ThresholdOptionInfo& info(ThresholdOption o) {
  return kThresholdOptions[static_cast<size_t>(o)];
}

// The threshold a role's spans are judged by, and its option.
constexpr ThresholdOption kRoleOption[LT_ROLE_MAX] = {
    ThresholdOption::kSlow, ThresholdOption::kSlowIdle,
    ThresholdOption::kSlowDelivery};

}  // namespace

std::string threshold_default_text(ThresholdOption o) {
  if (o == ThresholdOption::kSlowIdle) return info(ThresholdOption::kSlow).flag;
  if (info(o).unit == ThresholdUnit::kHz)
    return fmt::format("{}Hz", Thresholds::kRefreshHz);
  return format_duration(info(o).default_ns);
}

Result<uint64_t> parse_refresh_rate(const std::string& text) {
  std::string_view s = text;
  if (s.size() > 2 && (s.ends_with("Hz") || s.ends_with("hz")))
    s.remove_suffix(2);
  // Digits with at most one point: no sign, exponent, hex, inf or nan.
  bool ok = !s.empty() && s.size() <= 16 &&
            s.find_first_not_of("0123456789.") == std::string_view::npos &&
            std::count(s.begin(), s.end(), '.') <= 1 && s != ".";
  double hz = ok ? std::strtod(std::string(s).c_str(), nullptr) : 0;
  if (!ok || hz < 1 || hz > 1000)
    return Status::Error(
        fmt::format("--refresh-rate: bad rate '{}': expected frames per "
                    "second from 1 to 1000 (60, 59.94, 144)",
                    text),
        ErrorKind::kUsage);
  return static_cast<uint64_t>(1e9 / hz + 0.5);
}

Result<ThresholdOverrides> parse_thresholds(const ThresholdArgs& args) {
  std::array<std::optional<uint64_t>, kThresholdOptionCount> v;
  for (const ThresholdOptionInfo& opt : kThresholdOptions) {
    const std::string& text = args[opt.id];
    if (text.empty()) continue;
    if (opt.unit == ThresholdUnit::kHz) {
      auto r = parse_refresh_rate(text);
      if (!r.ok()) return r.status();
      v[static_cast<size_t>(opt.id)] = *r;
      continue;
    }
    auto d = parse_duration(text);
    if (!d.ok())
      return Status::Error(
                 fmt::format("{}: {}", opt.flag, d.status().message()),
                 ErrorKind::kUsage)
          .with_hint(d.status().hint());
    if (*d == 0)
      return Status::Error(fmt::format("{}: must be above 0", opt.flag),
                           ErrorKind::kUsage);
    v[static_cast<size_t>(opt.id)] = *d;
  }
  auto at = [&](ThresholdOption o) { return v[static_cast<size_t>(o)]; };
  ThresholdOverrides o;
  for (int r = 0; r < LT_ROLE_MAX; ++r) o.slow_ns[r] = at(kRoleOption[r]);
  if (!o.slow_ns[LT_ROLE_IDLE] && o.slow_ns[LT_ROLE_DISPATCH]) {
    o.slow_ns[LT_ROLE_IDLE] = o.slow_ns[LT_ROLE_DISPATCH];
    o.idle_from_slow = true;
  }
  o.slow_input_ns = at(ThresholdOption::kSlowInput);
  o.barrier_stall_ns = at(ThresholdOption::kBarrierStall);
  o.refresh_ns = at(ThresholdOption::kRefreshRate);
  return o;
}

Result<uint64_t> parse_hang(const std::string& text) {
  // The manual's "0 turns it off": a bare 0 needs no unit.
  if (!text.empty() && text.find_first_not_of('0') == std::string::npos)
    return uint64_t{0};
  auto d = parse_duration(text);
  if (!d.ok())
    return Status::Error(fmt::format("--hang: {}", d.status().message()),
                         ErrorKind::kUsage)
        .with_hint(d.status().hint());
  return *d;
}

Thresholds thresholds_for_record(const ThresholdOverrides& o) {
  Thresholds t;
  for (int r = 0; r < LT_ROLE_MAX; ++r)
    if (o.slow_ns[r]) t.slow_ns[r] = *o.slow_ns[r];
  if (o.slow_input_ns) t.slow_input_ns = *o.slow_input_ns;
  if (o.barrier_stall_ns) t.barrier_stall_ns = *o.barrier_stall_ns;
  if (o.refresh_ns) t.refresh_ns = *o.refresh_ns;
  t.sample_after_ns =
      std::min(t.slow_ns[LT_ROLE_DISPATCH], t.slow_ns[LT_ROLE_IDLE]) / 2;
  return t;
}

Result<Thresholds> apply_overrides(const Thresholds& recorded,
                                   const ThresholdOverrides& o) {
  Thresholds t = recorded;
  for (int r = 0; r < LT_ROLE_MAX; ++r) {
    if (!o.slow_ns[r]) continue;
    uint64_t want = *o.slow_ns[r];
    // With --record-all every span crossed the ring buffer: any threshold.
    if (want < recorded.slow_ns[r] && !recorded.record_all) {
      if (r == LT_ROLE_IDLE && o.idle_from_slow) continue;
      return Status::Error(
          fmt::format("{} {} is below the recorded {}: shorter spans never "
                      "reached the recording",
                      info(kRoleOption[r]).flag, format_duration(want),
                      format_duration(recorded.slow_ns[r])),
          ErrorKind::kUsage);
    }
    t.slow_ns[r] = want;
  }
  if (o.slow_input_ns) t.slow_input_ns = *o.slow_input_ns;
  // Frames are timed in userspace, from spans: any rate.
  if (o.refresh_ns) t.refresh_ns = *o.refresh_ns;
  if (o.barrier_stall_ns) {
    // What waited behind a barrier (QueueEvent) was read when it had been
    // up the recorded threshold: a barrier stalled sooner would have no
    // count of the messages it held back.
    if (*o.barrier_stall_ns < recorded.barrier_stall_ns)
      return Status::Error(
          fmt::format("{} {} is below the recorded {}: what waited behind a "
                      "barrier was read only at the recorded threshold",
                      info(ThresholdOption::kBarrierStall).flag,
                      format_duration(*o.barrier_stall_ns),
                      format_duration(recorded.barrier_stall_ns)),
          ErrorKind::kUsage);
    t.barrier_stall_ns = *o.barrier_stall_ns;
  }
  return t;
}

}  // namespace looptrace
