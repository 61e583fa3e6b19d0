# Backend switches. A switch must not lie: enabling a backend whose code does not exist yet stops the
# configure step with a message that says so, instead of silently building the CPU reference only.
foreach(backend KOKKOS CUDA HIP)
  string(TOLOWER ${backend} dir)
  if(SPATTN_ENABLE_${backend})
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/backends/${dir}/CMakeLists.txt)
      message(FATAL_ERROR "SPATTN_ENABLE_${backend}=ON, but the ${dir} backend is not implemented yet "
                          "(backends/${dir}/ has no code). Configure with -DSPATTN_ENABLE_${backend}=OFF; "
                          "the reference backend (CPU) is always built.")
    endif()
  endif()
endforeach()
