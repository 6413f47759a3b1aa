// The frames part of the reports (analysis/frames.h): the text FRAMES
// section and the JSON "frames", "janky_frames" and "janky_frames_omitted"
// (docs/json-schema.md).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "analysis/findings.h"
#include "analysis/frames.h"

namespace looptrace {

// Janky frames the text report shows with their cause: the worst.
inline constexpr size_t kTextJankyFrames = 10;

void write_frames_report(std::ostream& os, const FrameAnalysis& a,
                         const ReportContext& ctx);

// {"frames": [...], "janky_frames": [...], "janky_frames_omitted": N}
nlohmann::json frames_to_json(const FrameAnalysis& a, const ReportContext& ctx);

}  // namespace looptrace
