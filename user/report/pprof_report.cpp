#include "report/pprof_report.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/text.h"
#include "profiles/profile.h"
#include "python/frames.h"
#include "report/pprof/profile.pb.h"
#include "report/report_common.h"
#include "v8/frames.h"

namespace looptrace {
namespace {

namespace pb = perftools::profiles;

// Names are bounded like the text report's; a profile of a hostile
// process must stay a reasonable size.
constexpr size_t kMaxName = 1024;

// The profile under construction: its string table, functions, mappings
// and locations, each added once.
class Builder {
 public:
  Builder(const ReportContext& ctx, pb::Profile* p)
      : names_(ctx.symbolizer), p_(p) {
    str("");  // [0] is "" by the format's rule
  }

  int64_t str(const std::string& s) {
    auto [it, added] = strings_.try_emplace(s, p_->string_table_size());
    if (added) p_->add_string_table(s);
    return it->second;
  }
  int64_t name(const std::string& s) { return str(printable(s, kMaxName)); }

  // The location of a frame of process `pid`.
  uint64_t location(uint32_t pid, uint64_t addr) {
    auto [it, added] = locations_.try_emplace({pid, addr}, 0);
    if (!added) return it->second;
    const Frame& f = names_.frame(pid, addr);
    pb::Location* loc = p_->add_location();
    loc->set_id(static_cast<uint64_t>(p_->location_size()));
    pb::Line* line = loc->add_line();
    if ((python::is_py_frame(addr) || v8::is_js_frame(addr)) && f.known()) {
      // "qualname (file.py:22)", "stall (app.js:8)": the function, its
      // file, the line.
      auto [qualname, lineno] = split_python(f.function);
      line->set_function_id(function(qualname, f.module));
      line->set_line(lineno);
    } else {
      loc->set_address(addr);
      if (!f.module.empty()) loc->set_mapping_id(mapping(f.module));
      line->set_function_id(function(names_.function(pid, addr), f.module));
    }
    return it->second = loc->id();
  }

  // A frame of no process: the kernel function a span waited in.
  uint64_t pseudo_location(const std::string& fn) {
    auto [it, added] = pseudo_.try_emplace(fn, 0);
    if (!added) return it->second;
    pb::Location* loc = p_->add_location();
    loc->set_id(static_cast<uint64_t>(p_->location_size()));
    loc->add_line()->set_function_id(function(fn, ""));
    return it->second = loc->id();
  }

  report::FrameNames& names() { return names_; }

 private:
  static std::pair<std::string, int64_t> split_python(const std::string& fn) {
    const size_t open = fn.rfind(" (");
    const size_t colon = fn.rfind(':');
    if (open == std::string::npos || colon == std::string::npos ||
        colon < open || fn.back() != ')')
      return {fn, 0};
    int64_t line = 0;
    for (size_t i = colon + 1; i + 1 < fn.size(); ++i) {
      if (fn[i] < '0' || fn[i] > '9') return {fn.substr(0, open), 0};
      line = line * 10 + (fn[i] - '0');
      if (line > INT32_MAX) return {fn.substr(0, open), 0};
    }
    return {fn.substr(0, open), line};
  }

  uint64_t function(const std::string& fn, const std::string& file) {
    auto [it, added] = functions_.try_emplace({fn, file}, 0);
    if (!added) return it->second;
    pb::Function* f = p_->add_function();
    f->set_id(static_cast<uint64_t>(p_->function_size()));
    f->set_name(name(fn));
    f->set_system_name(f->name());
    if (!file.empty()) f->set_filename(name(file));
    return it->second = f->id();
  }

  uint64_t mapping(const std::string& module) {
    auto [it, added] = mappings_.try_emplace(module, 0);
    if (!added) return it->second;
    pb::Mapping* m = p_->add_mapping();
    m->set_id(static_cast<uint64_t>(p_->mapping_size()));
    m->set_filename(name(module));
    m->set_has_functions(true);
    return it->second = m->id();
  }

  report::FrameNames names_;
  pb::Profile* p_;
  std::unordered_map<std::string, int64_t> strings_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> locations_;
  std::map<std::string, uint64_t> pseudo_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::map<std::string, uint64_t> mappings_;
};

// The labels every sample of span `e` carries.
void label(Builder& b, pb::Sample* s, const SpanEvent& e,
           const std::string& target) {
  auto text = [&](const char* key, const std::string& value) {
    pb::Label* l = s->add_label();
    l->set_key(b.str(key));
    l->set_str(b.name(value));
  };
  auto num = [&](const char* key, int64_t value) {
    pb::Label* l = s->add_label();
    l->set_key(b.str(key));
    l->set_num(value);
  };
  text("role", role_name(e.role));
  text("target", target);
  text("comm", e.comm);
  num("pid", e.pid);
  num("tid", e.tid);
}

void value_type(Builder& b, pb::ValueType* v, const char* type,
                const char* unit) {
  v->set_type(b.str(type));
  v->set_unit(b.str(unit));
}

// The serialized profile, gzipped as pprof expects it.
Status write_gzipped(std::ostream& os, const std::string& raw) {
  std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> c(
      libdeflate_alloc_compressor(6), libdeflate_free_compressor);
  if (!c) return Status::Error("--pprof: out of memory compressing");
  std::string gz(libdeflate_gzip_compress_bound(c.get(), raw.size()), '\0');
  const size_t n = libdeflate_gzip_compress(c.get(), raw.data(), raw.size(),
                                            gz.data(), gz.size());
  if (n == 0) return Status::Error("--pprof: compressing the profile failed");
  os.write(gz.data(), static_cast<std::streamsize>(n));
  os.flush();
  if (!os) return Status::Error("writing the pprof profile failed");
  return Status::Ok();
}

}  // namespace

Status write_pprof(std::ostream& os, const Findings& found,
                   const ReportContext& ctx) {
  pb::Profile p;
  Builder b(ctx, &p);
  value_type(b, p.add_sample_type(), "samples", "count");
  value_type(b, p.add_sample_type(), "cpu", "nanoseconds");
  value_type(b, p.add_sample_type(), "blocked", "nanoseconds");
  p.set_default_sample_type(b.str("cpu"));
  const int64_t period =
      ctx.sample_hz ? 1'000'000'000 / static_cast<int64_t>(ctx.sample_hz) : 0;
  value_type(b, p.mutable_period_type(), "cpu", "nanoseconds");
  p.set_period(period);
  p.set_duration_nanos(static_cast<int64_t>(ctx.duration_ns));
  for (const SlowSpan& s : found.analysis.slow) {
    const SpanEvent& e = s.span;
    const std::string target = report::describe_target(e, ctx).text;
    for (const StackGroup& g : s.stacks) {
      pb::Sample* sample = p.add_sample();
      for (uint64_t addr : g.frames)
        sample->add_location_id(b.location(e.pid, addr));
      sample->add_value(g.count);
      sample->add_value(static_cast<int64_t>(g.count) * period);
      sample->add_value(0);
      label(b, sample, e, target);
    }
    for (const BlockGroup& g : s.blocked) {
      pb::Sample* sample = p.add_sample();
      const std::string wait = report::kernel_wait(g.kframes, b.names());
      sample->add_location_id(
          b.pseudo_location("[" + (wait.empty() ? "blocked" : wait) + "]"));
      for (uint64_t addr : g.frames)
        sample->add_location_id(b.location(e.pid, addr));
      sample->add_value(0);
      sample->add_value(0);
      sample->add_value(static_cast<int64_t>(g.blocked_ns));
      label(b, sample, e, target);
    }
  }
  std::string raw;
  if (!p.SerializeToString(&raw))
    return Status::Error("--pprof: the profile could not be serialized");
  return write_gzipped(os, raw);
}

}  // namespace looptrace
