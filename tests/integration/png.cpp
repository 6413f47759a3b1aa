#include "png.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace lt_test {
namespace {

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | p[3];
}

int paeth(int a, int b, int c) {
  int p = a + b - c;
  int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Undoes the per-row filters (PNG spec, section 9) in place; `raw` holds
// each row's filter byte followed by its bytes.
bool unfilter(std::vector<unsigned char>& raw, size_t rows, size_t stride,
              size_t bpp, std::vector<unsigned char>* out) {
  out->assign(rows * stride, 0);
  std::vector<unsigned char> zero(stride, 0);
  for (size_t y = 0; y < rows; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* in = &raw[y * (stride + 1) + 1];
    unsigned char* cur = &(*out)[y * stride];
    const unsigned char* prev = y ? &(*out)[(y - 1) * stride] : zero.data();
    for (size_t i = 0; i < stride; ++i) {
      int a = i >= bpp ? cur[i - bpp] : 0;
      int b = prev[i];
      int c = i >= bpp ? prev[i - bpp] : 0;
      int pred;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4:
          pred = paeth(a, b, c);
          break;
        default:
          return false;
      }
      cur[i] = static_cast<unsigned char>(in[i] + pred);
    }
  }
  return true;
}

}  // namespace

Image read_png(const std::string& path, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  std::vector<unsigned char> d((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
  static const unsigned char kSig[8] = {0x89, 'P',  'N',  'G',
                                        '\r', '\n', 0x1a, '\n'};
  if (d.size() < 8 || std::memcmp(d.data(), kSig, 8) != 0) {
    *error = path + ": not a PNG file";
    return {};
  }
  uint32_t width = 0, height = 0;
  int color_type = -1;
  std::vector<unsigned char> idat;
  for (size_t p = 8; p + 12 <= d.size();) {
    const uint32_t len = be32(&d[p]);
    if (len > d.size() - p - 12) break;
    const unsigned char* type = &d[p + 4];
    const unsigned char* body = &d[p + 8];
    if (be32(body + len) != crc32(crc32(0, nullptr, 0), type, len + 4)) {
      *error = path + ": bad chunk CRC";
      return {};
    }
    if (std::memcmp(type, "IHDR", 4) == 0 && len >= 13) {
      width = be32(body);
      height = be32(body + 4);
      // Bit depth 8, no interlace: what Chromium writes.
      if (body[8] != 8 || body[12] != 0 || (body[9] != 2 && body[9] != 6)) {
        *error = path + ": only 8-bit RGB/RGBA, non-interlaced, is read";
        return {};
      }
      color_type = body[9];
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      idat.insert(idat.end(), body, body + len);
    }
    p += 12 + len;
  }
  if (color_type < 0 || width == 0 || height == 0 || width > 20000 ||
      height > 20000) {
    *error = path + ": no usable IHDR";
    return {};
  }
  const size_t bpp = color_type == 6 ? 4 : 3;
  const size_t stride = width * bpp;
  std::vector<unsigned char> raw(height * (stride + 1));
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, idat.data(), idat.size()) != Z_OK ||
      raw_len != raw.size()) {
    *error = path + ": image data does not inflate to its size";
    return {};
  }
  std::vector<unsigned char> bytes;
  if (!unfilter(raw, height, stride, bpp, &bytes)) {
    *error = path + ": unknown row filter";
    return {};
  }
  Image img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.pixels.resize(size_t{width} * height);
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const unsigned char* px = &bytes[i * bpp];
    img.pixels[i] = (uint32_t{px[0]} << 16) | (uint32_t{px[1]} << 8) | px[2];
  }
  return img;
}

}  // namespace lt_test
