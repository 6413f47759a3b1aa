// A PNG reader for what headless Chromium writes: 8-bit RGB or RGBA, not
// interlaced. Enough for tests that count pixels of exact colors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lt_test {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint32_t> pixels;  // 0xRRGGBB, row by row (alpha dropped)

  uint32_t at(int x, int y) const {
    return pixels[static_cast<size_t>(y) * width + x];
  }
};

// Reads `path`; on failure returns an empty image and sets `error`.
Image read_png(const std::string& path, std::string* error);

}  // namespace lt_test
