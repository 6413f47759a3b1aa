// A whole recording (`record -o`): header, blocks, records. Read to its
// end or its first damage; never a crash, a hang or a read past a buffer.
#include <cstdint>

#include "fuzz_check.h"
#include "record/recording.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = looptrace::RecordingReader::FromMemory(data, size);
  if (!r.ok()) return 0;
  looptrace::Event ev;
  uint64_t n = 0;
  while ((*r)->next(&ev)) ++n;
  LT_FUZZ_CHECK(n == (*r)->events());
  return 0;
}
