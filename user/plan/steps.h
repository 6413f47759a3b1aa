// The steps of the plan (plan.h), one file each: private to plan/.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "model/probe.h"
#include "plan/plan.h"
#include "plan/request.h"
#include "profiles/resolve.h"
#include "trace/options.h"

namespace looptrace::plan {

// options.cpp: the kernel's options and every threshold, from the values
// typed.
Status build_options(const RecordArgs& a, Plan* p);

// probes.cpp: the profile's probes and the ad-hoc ones.
Status build_probes(const RecordArgs& a, std::vector<ProbeDef>* probes,
                    std::string* note);

// runtime.cpp: with -p PID and no probe given, the profile of the runtime
// its libraries show and a line saying so ("" when none is known).
Result<std::string> detect_profile(uint32_t pid, std::string* note);
// With -- COMMAND and no probe given: every runtime profile installed here.
Status command_profiles(const RecordArgs& a, std::vector<ProbeDef>* probes,
                        std::string* note);

// input.cpp: the input probes and channels of `target` (-1: system-wide).
Status build_input(const RecordArgs& a, pid_t target,
                   const ResolveContext& rctx,
                   const std::vector<ProbeDef>& profile_io, InputTrace* in);

// gsources.cpp: custom GSource kinds of a running GLib process.
const ProbeDef* custom_gsource_model(const std::vector<ProbeDef>& probes);
void add_custom_gsources(pid_t pid, std::vector<ProbeDef>* probes);

// Any input option given (--input, --input-fd, --input-peer).
bool input_wanted(const RecordArgs& a);
// "refapp, glib, ...": the built-in profiles, for messages.
std::string join_builtin_names();

}  // namespace looptrace::plan
