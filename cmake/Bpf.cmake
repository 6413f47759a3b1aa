# Build a BPF C file into an object and a libbpf skeleton header:
#   looptrace_bpf_skeleton(NAME SOURCE) -> ${LOOPTRACE_BPF_GEN_DIR}/NAME.skel.h
# and a target NAME_skel. vmlinux.h is generated from the running kernel's BTF.
find_program(CLANG_EXE NAMES clang REQUIRED)
find_program(BPFTOOL_EXE NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

set(LOOPTRACE_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpfgen)
file(MAKE_DIRECTORY ${LOOPTRACE_BPF_GEN_DIR})

set(LOOPTRACE_VMLINUX_BTF /sys/kernel/btf/vmlinux CACHE FILEPATH
    "BTF of the kernel to build CO-RE programs against")
add_custom_command(
  OUTPUT ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h
  COMMAND ${BPFTOOL_EXE} btf dump file ${LOOPTRACE_VMLINUX_BTF} format c
          > ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h.tmp
          ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${LOOPTRACE_VMLINUX_BTF}")
add_custom_target(vmlinux_h DEPENDS ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h)

execute_process(COMMAND uname -m OUTPUT_VARIABLE _arch
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_arch STREQUAL "x86_64")
  set(LOOPTRACE_BPF_ARCH x86)
elseif(_arch STREQUAL "aarch64")
  set(LOOPTRACE_BPF_ARCH arm64)
else()
  set(LOOPTRACE_BPF_ARCH ${_arch})
endif()

file(GLOB _bpf_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bpf/*.h
     ${CMAKE_SOURCE_DIR}/include/looptrace/*.h)

# Warnings are errors where the project's own scripts and CI ask for it
# (LOOPTRACE_WERROR), as for the C++: a packager's newer clang must not
# fail the build on a new warning.
if(LOOPTRACE_WERROR)
  set(_bpf_werror -Werror)
else()
  set(_bpf_werror)
endif()

function(looptrace_bpf_skeleton name src)
  set(obj ${LOOPTRACE_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${LOOPTRACE_BPF_GEN_DIR}/${name}.skel.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${CLANG_EXE} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_${LOOPTRACE_BPF_ARCH}
            -Wall ${_bpf_werror} -Wno-unused-function
            -I${LOOPTRACE_BPF_GEN_DIR} -I${CMAKE_SOURCE_DIR}/include
            -I${CMAKE_SOURCE_DIR}/bpf -c ${src} -o ${obj}.tmp
    # bpftool's static linker drops DWARF, keeping the skeleton small.
    COMMAND ${BPFTOOL_EXE} gen object ${obj} ${obj}.tmp
    DEPENDS ${src} ${LOOPTRACE_BPF_GEN_DIR}/vmlinux.h
            ${_bpf_headers}
    COMMENT "BPF ${name}")
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL_EXE} gen skeleton ${obj} name ${name}_bpf > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "Skeleton ${name}")
  add_custom_target(${name}_skel DEPENDS ${skel})
  # One producer of vmlinux.h, or parallel skeleton builds race on it.
  add_dependencies(${name}_skel vmlinux_h)
endfunction()
