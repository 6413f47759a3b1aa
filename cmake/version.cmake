# Writes ${OUT}: the git commit looptrace is built from, for `--version`.
# Run at every build (a commit does not reconfigure the tree); the file is
# rewritten only when its text changes, so an unchanged commit rebuilds
# nothing. Outside a git checkout (a source tarball) the commit is unknown.
execute_process(
  COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  # Uncommitted changes to tracked files: say so, as `git describe --dirty`.
  execute_process(
    COMMAND git -C "${SRC}" diff-index --quiet HEAD --
    RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "#pragma once\n#define LOOPTRACE_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
