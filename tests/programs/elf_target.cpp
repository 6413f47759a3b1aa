// A small program the ELF and symbolization tests inspect. It is built PIE,
// non-PIE and stripped; the names below are what the tests resolve.
//
//   elf_target_pie               calls everything once, exits 0
//   elf_target_pie --print-addr  prints runtime addresses, then waits until
//                                stdin closes (so a test can symbolize it)
//   elf_target_pie --call N      calls lt_plain_function N times (a known
//                                count for uprobe tests)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define LT_TEST_FN __attribute__((noinline, used))

extern "C" {
// The printed address inside Widget::draw; set by lt_capture_caller.
void* lt_draw_return_address = nullptr;
}

namespace lt_test {

// Virtual methods give Shape and Widget vtables ("vtable for
// lt_test::Widget" is an OBJECT symbol).
class Shape {
 public:
  virtual ~Shape() = default;
  LT_TEST_FN virtual int area() const { return 0; }
};

class Widget : public Shape {
 public:
  // Out of line: GCC emits the complete (C1) and base (C2) constructors as
  // aliases at one address, which must resolve as one match.
  LT_TEST_FN explicit Widget(int size);
  LT_TEST_FN int draw(int x);
  LT_TEST_FN int area() const override { return size_ * size_; }

 private:
  int size_;
};

LT_TEST_FN Widget::Widget(int size) : size_(size) {}

LT_TEST_FN int overloaded(int x) { return x * 2 + 1; }
LT_TEST_FN double overloaded(double x) { return x * 1.5; }

}  // namespace lt_test

extern "C" LT_TEST_FN void lt_capture_caller() {
  lt_draw_return_address = __builtin_return_address(0);
}

LT_TEST_FN int lt_test::Widget::draw(int x) {
  lt_capture_caller();
  // Work after the call keeps it from being a tail call, so the return
  // address lies inside draw.
  return x + size_ + area();
}

// A table of function pointers, as GLib's exported GSourceFuncs tables
// hold its static dispatch functions: "*(lt_test_funcs+16)" names
// lt_table_dispatch (PIE: through an R_X86_64_RELATIVE relocation; non-PIE:
// the address is in the file). The slot at +8 is null.
static LT_TEST_FN int lt_table_dispatch(int x) {
  asm volatile("" : "+r"(x));
  return x + 2;
}
struct LtFuncs {
  int (*prepare)(int);
  void* unused;
  int (*dispatch)(int);
};
extern "C" {
int lt_plain_function(int x);
extern const LtFuncs lt_test_funcs;
__attribute__((used))
const LtFuncs lt_test_funcs = {lt_plain_function, nullptr, lt_table_dispatch};
}

// A library's version as GLib exports its own (glib_major_version...):
// what a profile's version gate reads.
extern "C" {
extern const unsigned lt_test_major_version, lt_test_minor_version;
__attribute__((used)) const unsigned lt_test_major_version = 2;
__attribute__((used)) const unsigned lt_test_minor_version = 74;
}

extern "C" LT_TEST_FN int lt_plain_function(int x) {
  // The asm statement keeps calls from being merged or removed.
  asm volatile("" : "+r"(x));
  return x + 1;
}

namespace {

int run_all() {
  lt_test::Widget w(3);
  lt_test::Shape* s = &w;
  int r = w.draw(1) + s->area() + lt_test::overloaded(2) +
          static_cast<int>(lt_test::overloaded(2.0)) + lt_plain_function(3);
  return r == 0;  // never: keeps the result used, exits 0
}

// Itanium C++ ABI: a pointer to a non-virtual member function holds the
// function's address in its first word.
void* member_function_address(int (lt_test::Widget::*pmf)(int)) {
  void* p = nullptr;
  std::memcpy(&p, &pmf, sizeof p);
  return p;
}

int print_addresses() {
  static lt_test::Widget widget(3);
  widget.draw(1);  // fills lt_draw_return_address
  void* vptr = nullptr;
  std::memcpy(&vptr, &widget, sizeof vptr);  // first word of the object
  std::printf("draw %p\n", member_function_address(&lt_test::Widget::draw));
  std::printf("draw_ret %p\n", lt_draw_return_address);
  std::printf("plain %p\n", reinterpret_cast<void*>(&lt_plain_function));
  std::printf("vtable %p\n", vptr);
  std::printf("ready\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--print-addr") == 0)
    return print_addresses();
  if (argc > 2 && std::strcmp(argv[1], "--call") == 0) {
    long n = std::strtol(argv[2], nullptr, 10);
    int sum = 0;
    for (long i = 0; i < n; i++) sum += lt_plain_function(static_cast<int>(i));
    return sum == -1;
  }
  return run_all();
}
