# What `cmake --install` puts where, and the Debian package built from it
# (scripts/package.sh). Paths follow GNUInstallDirs: with the default prefix
# /usr/local, `looptrace` goes to bin/, the reference app that `looptrace
# demo` runs to libexec/looptrace/ (found relative to the looptrace binary,
# so a DESTDIR or another prefix works too), the man page, bash completion
# and the docs to share/.
# (LOOPTRACE_PKG_LIBEXECDIR is set in CMakeLists.txt, where the core that
# looks there is built.)

# `looptrace --version` names the commit: a header rewritten at every build
# when (and only when) HEAD changed.
set(LOOPTRACE_VERSION_HEADER ${CMAKE_BINARY_DIR}/generated/version.h)
add_custom_target(looptrace_version
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR}
          -DOUT=${LOOPTRACE_VERSION_HEADER} -P ${CMAKE_SOURCE_DIR}/cmake/version.cmake
  BYPRODUCTS ${LOOPTRACE_VERSION_HEADER}
  COMMENT "" VERBATIM)
add_dependencies(looptrace looptrace_version)
target_include_directories(looptrace PRIVATE ${CMAKE_BINARY_DIR}/generated)

# looptrace(1), from the manual (docs/looptrace.md) by pandoc: one text for
# both. Its first line, "# looptrace(1)", is the man page's title.
option(LOOPTRACE_MAN "Build the man page (needs pandoc)" ON)
if(LOOPTRACE_MAN)
  find_program(PANDOC pandoc REQUIRED)
  set(LOOPTRACE_MAN_PAGE ${CMAKE_BINARY_DIR}/looptrace.1)
  add_custom_command(
    OUTPUT ${LOOPTRACE_MAN_PAGE}
    COMMAND ${PANDOC} --standalone --from=markdown --to=man
            --shift-heading-level-by=-1 --metadata=title:looptrace
            --metadata=section:1 --metadata=header:looptrace
            "--metadata=footer:looptrace ${PROJECT_VERSION}"
            --output=${LOOPTRACE_MAN_PAGE} ${CMAKE_SOURCE_DIR}/docs/looptrace.md
    DEPENDS ${CMAKE_SOURCE_DIR}/docs/looptrace.md
    COMMENT "Generating looptrace.1 from docs/looptrace.md" VERBATIM)
  add_custom_target(looptrace_man ALL DEPENDS ${LOOPTRACE_MAN_PAGE})
  install(FILES ${LOOPTRACE_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

install(TARGETS looptrace RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS refapp RUNTIME DESTINATION ${LOOPTRACE_PKG_LIBEXECDIR})
install(FILES ${CMAKE_SOURCE_DIR}/scripts/completion/looptrace.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME looptrace)
# `looptrace monitor` as a service (docs/looptrace.md, MONITOR).
install(FILES ${CMAKE_SOURCE_DIR}/scripts/looptrace-monitor.service
        DESTINATION lib/systemd/system)
install(FILES ${CMAKE_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/
        DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

# The Debian package: `Depends` computed by dpkg-shlibdeps from the libraries
# the binaries link, so `apt-get install ./looptrace_*.deb` pulls them.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME looptrace)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "looptrace developers <looptrace@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "event-loop lag tracer for unmodified processes (eBPF)")
set(CPACK_PACKAGE_DESCRIPTION
    "looptrace times every dispatch of a program's event loop (GLib, GTK, Qt, Node, ...) from outside with uprobes, and reports slow dispatches, input latency, idle-handler and sync-barrier stalls with their stacks.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
