/* Seed for fuzz_elf: a PIE and a non-PIE program linked with libc
 * (.gnu.version, imports in .dynsym, a main and a local function). */
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) static int handler(int x) { return x + 1; }

int main(int argc, char** argv) {
  printf("%d %zu\n", handler(argc), strlen(argv[0]));
  return 0;
}
