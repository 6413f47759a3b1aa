// --pprof: the profile, gunzipped and parsed back with protobuf's own
// reader, holds each slow span's sampled stacks with their counts and CPU
// time, the places they blocked with the time blocked, labels naming the
// span, and names a hostile process supplied made printable.
#include "report/pprof_report.h"

#include <gtest/gtest.h>
#include <libdeflate.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "findings_fixture.h"
#include "report/pprof/profile.pb.h"

namespace looptrace {
namespace {

using namespace fixture;
namespace pb = perftools::profiles;

pb::Profile parse(const std::string& gz) {
  // A gzip member ends with the uncompressed size mod 2^32.
  EXPECT_GT(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f) << "gzip magic";
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b) << "gzip magic";
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<unsigned char>(
             gz[gz.size() - 4 + static_cast<size_t>(i)]))
         << (8 * i);
  std::string raw(n, '\0');
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  size_t got = 0;
  EXPECT_EQ(libdeflate_gzip_decompress(d, gz.data(), gz.size(), raw.data(),
                                       raw.size(), &got),
            LIBDEFLATE_SUCCESS);
  libdeflate_free_decompressor(d);
  pb::Profile p;
  EXPECT_TRUE(p.ParseFromString(raw.substr(0, got)));
  return p;
}

// A sample as text: "label=value,...|frame<frame<..." (innermost first)
// with its values.
struct Decoded {
  std::map<std::string, std::vector<int64_t>> samples;
  std::vector<std::string> types;
};

Decoded decode(const pb::Profile& p) {
  Decoded d;
  auto s = [&p](int64_t i) -> std::string {
    EXPECT_GE(i, 0);
    EXPECT_LT(i, p.string_table_size());
    return i >= 0 && i < p.string_table_size() ? p.string_table(i) : "?";
  };
  EXPECT_EQ(p.string_table(0), "") << "string_table[0] must be empty";
  for (const pb::ValueType& v : p.sample_type())
    d.types.push_back(s(v.type()) + "/" + s(v.unit()));
  std::map<uint64_t, std::string> fn;
  for (const pb::Function& f : p.function()) fn[f.id()] = s(f.name());
  std::map<uint64_t, std::string> loc;
  for (const pb::Location& l : p.location()) {
    EXPECT_EQ(l.line_size(), 1);
    loc[l.id()] = fn.at(l.line(0).function_id());
    if (l.line(0).line() != 0)
      loc[l.id()] += ":" + std::to_string(l.line(0).line());
  }
  for (const pb::Sample& smp : p.sample()) {
    std::string key;
    for (const pb::Label& l : smp.label())
      key += s(l.key()) + "=" +
             (l.str() ? s(l.str()) : std::to_string(l.num())) + ",";
    key += "|";
    for (int i = 0; i < smp.location_id_size(); ++i)
      key += (i ? "<" : "") + loc.at(smp.location_id(i));
    std::vector<int64_t>& v = d.samples[key];
    v.resize(static_cast<size_t>(smp.value_size()));
    for (int i = 0; i < smp.value_size(); ++i)
      v[static_cast<size_t>(i)] += smp.value(i);
  }
  return d;
}

TEST(PprofReport, SampledStacksWithCountsCpuTimeAndLabels) {
  TraceFixture f;
  f.ctx.sample_hz = 1000;  // a sample stands for 1 ms
  std::ostringstream os;
  ASSERT_TRUE(write_pprof(os, f.found, f.ctx).ok());
  const pb::Profile p = parse(os.str());
  Decoded d = decode(p);
  EXPECT_EQ(d.types,
            (std::vector<std::string>{"samples/count", "cpu/nanoseconds",
                                      "blocked/nanoseconds"}));
  EXPECT_EQ(p.string_table(p.default_sample_type()), "cpu");
  EXPECT_EQ(p.period(), 1'000'000);
  EXPECT_EQ(p.duration_nanos(), static_cast<int64_t>(5000 * kMs));
  const std::string kLabels =
      "role=dispatch,target=StallHandler what=7,comm=loopapp,pid=100,"
      "tid=100,|";
  const std::string kHandler =
      "<StallHandler::handleMessage(Message const&)"
      "<Handler::dispatchMessage(Message&)<Looper::loop()<main";
  // Spans a and d: one handler, so one target; samples at other offsets
  // of busyLoop are other locations of one function.
  uint64_t busy = 0;
  for (const auto& [key, v] : d.samples)
    if (key.rfind(kLabels + "busyLoop(int)" + kHandler, 0) == 0) {
      busy += static_cast<uint64_t>(v[0]);
      EXPECT_EQ(v[1], v[0] * 1'000'000) << key;
      EXPECT_EQ(v[2], 0) << key;
    }
  EXPECT_EQ(busy, 12u);
  EXPECT_EQ(d.samples.at(kLabels +
                         "std::this_thread::sleep_for<long, "
                         "std::ratio<1l, 1000l> >" +
                         kHandler),
            (std::vector<int64_t>{3, 3'000'000, 0}));
  // An idle handler is labelled so; a library without symbols is its file
  // name, an unknown address [unknown]; the line break in a name is
  // escaped, not written raw.
  bool idle = false, odd = false;
  for (const auto& [key, v] : d.samples) {
    if (key.find("role=idle,target=IdleHandler::queueIdle()") == 0) {
      idle = true;
      EXPECT_EQ(v[0], 4);
    }
    if (key.find("operator;\\nodd()<[libfoo.so]<[unknown]<Looper::loop()") !=
        std::string::npos) {
      odd = true;
      EXPECT_EQ(v[0], 2);
    }
    EXPECT_EQ(key.find('\n'), std::string::npos) << key;
  }
  EXPECT_TRUE(idle);
  EXPECT_TRUE(odd);
  uint64_t samples = 0, total = 0;
  for (const SlowSpan& s : f.found.analysis.slow) samples += s.nsamples;
  for (const auto& [key, v] : d.samples) total += static_cast<uint64_t>(v[0]);
  EXPECT_EQ(total, samples) << "every sample counted once";
}

// Where slow spans blocked: the time blocked, with the kernel function it
// waited in as the innermost frame ("[blocked]" when none is known).
TEST(PprofReport, BlockedTimeIsItsOwnSampleType) {
  TraceFixture f;
  BlockGroup sleep;
  sleep.frames = sleep_stack();
  sleep.blocked_ns = 90 * kMs + 7;
  sleep.count = 2;
  f.found.analysis.slow[0].blocked.push_back(sleep);
  std::ostringstream os;
  ASSERT_TRUE(write_pprof(os, f.found, f.ctx).ok());
  Decoded d = decode(parse(os.str()));
  int64_t blocked = 0;
  for (const auto& [key, v] : d.samples) {
    if (v[2] == 0) continue;
    blocked += v[2];
    EXPECT_EQ(v[0], 0);
    EXPECT_NE(key.find("|[blocked]<std::this_thread::sleep_for"),
              std::string::npos)
        << key;
  }
  EXPECT_EQ(blocked, static_cast<int64_t>(90 * kMs + 7));
}

TEST(PprofReport, NoSlowSpansIsAnEmptyProfile) {
  std::ostringstream os;
  ASSERT_TRUE(write_pprof(os, Findings{}, ReportContext{}).ok());
  const pb::Profile p = parse(os.str());
  EXPECT_EQ(p.sample_size(), 0);
  EXPECT_EQ(p.sample_type_size(), 3);
}

TEST(PprofReport, AFailedStreamIsAnError) {
  TraceFixture f;
  std::ostringstream os;
  os.setstate(std::ios::badbit);
  EXPECT_FALSE(write_pprof(os, f.found, f.ctx).ok());
}

}  // namespace
}  // namespace looptrace
