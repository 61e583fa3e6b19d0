# Backend switches. A switch must not lie: enabling a backend whose code does not exist yet stops the
# configure step with a message that says so, instead of silently building the CPU reference only.
# SPATTN_ENABLE_HIP is not a folder of its own: AMD GPUs run the Kokkos backend (backends/kokkos) on a Kokkos built
# with HIP (cmake/SpattnKokkos.cmake checks that the Kokkos found has it).
if(SPATTN_ENABLE_HIP AND NOT SPATTN_ENABLE_KOKKOS)
  message(STATUS "spattn: SPATTN_ENABLE_HIP=ON builds the Kokkos backend on a HIP Kokkos (SPATTN_ENABLE_KOKKOS=ON)")
  set(SPATTN_ENABLE_KOKKOS ON CACHE BOOL "Build the portable Kokkos backend (backends/kokkos)" FORCE)
endif()
foreach(backend KOKKOS CUDA)
  string(TOLOWER ${backend} dir)
  if(SPATTN_ENABLE_${backend})
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/backends/${dir}/CMakeLists.txt)
      message(FATAL_ERROR "SPATTN_ENABLE_${backend}=ON, but the ${dir} backend is not implemented yet "
                          "(backends/${dir}/ has no code). Configure with -DSPATTN_ENABLE_${backend}=OFF; "
                          "the reference backend (CPU) is always built.")
    endif()
  endif()
endforeach()
