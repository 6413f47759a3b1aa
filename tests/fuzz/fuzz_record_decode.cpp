// One record of a recording block: the first byte is its type, the rest
// its payload (what a block's checksum protects; a writer bug or a newer
// build could still hand us anything). Decodes or is refused.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "record/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // An exact-size heap copy, so ASan sees any read past the payload.
  std::vector<uint8_t> payload(data + 1, data + size);
  looptrace::Event ev;
  if (!looptrace::rec::decode_event(data[0], payload.data(), payload.size(),
                                    &ev))
    return 0;
  // What decodes encodes back to a record of the same type that decodes.
  std::string again;
  looptrace::rec::encode_event(ev, &again);
  LT_FUZZ_CHECK(again.size() >= 5 && static_cast<uint8_t>(again[0]) == data[0]);
  looptrace::Event twice;
  LT_FUZZ_CHECK(looptrace::rec::decode_event(
      data[0], reinterpret_cast<const uint8_t*>(again.data()) + 5,
      again.size() - 5, &twice));
  return 0;
}
