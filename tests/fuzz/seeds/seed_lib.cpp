// Seed for fuzz_elf: a small shared object with the symbol kinds the
// reader handles: C and C++ (mangled) functions, overloads, a vtable and
// typeinfo (OBJECT symbols), an alias, a size-0 assembly function and a
// symbol with a hidden (non-default) version next to its default one.
namespace ns {
struct W {
  virtual int draw(int);
};
int W::draw(int x) { return x + 1; }
}  // namespace ns

extern "C" int plain(int x) { return x * 3; }
extern "C" int plain_alias(int) __attribute__((alias("plain")));
int over(int x) { return x; }
double over(double x) { return x; }

extern "C" int old_impl(int x) { return x - 1; }
extern "C" int new_impl(int x) { return x + 2; }
__asm__(".symver old_impl, versioned@V1");
__asm__(".symver new_impl, versioned@@V2");

__asm__(
    ".globl bare_asm\n"
    ".type bare_asm, @function\n"
    "bare_asm: ret\n");
