# Compile flags shared by every spattn target (applied through spattn_set_flags()).
include(CheckCXXCompilerFlag)
set(SPATTN_ARCH_FLAGS "")
if(SPATTN_X86_64_V3 AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  check_cxx_compiler_flag(-march=x86-64-v3 SPATTN_HAS_X86_64_V3)
  if(SPATTN_HAS_X86_64_V3)
    set(SPATTN_ARCH_FLAGS -march=x86-64-v3)
  endif()
endif()

function(spattn_set_flags target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
  # -ffp-contract=off: the core's arithmetic is one definition for CPU and GPU; the compiler must not fuse
  # a*b+c behind our back (every fma in core/ is written out explicitly).
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                         -ffp-contract=off ${SPATTN_ARCH_FLAGS})
  if(SPATTN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SPATTN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                           -fno-sanitize-recover=all)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()
