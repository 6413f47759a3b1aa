// What a fuzz target checks beyond "no crash": a property that must hold
// for every input. A violation aborts with the property's text, which
// libFuzzer reports as a crash and saves the input for.
#pragma once

#include <cstdio>
#include <cstdlib>

#define LT_FUZZ_CHECK(cond)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                     \
      std::abort();                                                            \
    }                                                                          \
  } while (0)
