# Finds Kokkos for backends/kokkos: Debian 12's libtrilinos-kokkos-dev (Kokkos 3.4, Serial) or any Kokkos >= 3.4
# install given with -DKokkos_ROOT=<prefix> (e.g. Kokkos 4.6 with CUDA, /work/shared/deps/README.md).
set(CMAKE_CXX_EXTENSIONS OFF)  # spattn builds ISO C++20 (spattn_set_flags); Kokkos' config insists, and says so if unset
find_package(Kokkos 3.4 REQUIRED)
# Debian's package is broken as shipped: Kokkos::kokkos names /usr/lib/include as its include directory; the real
# one is Kokkos_INCLUDE_DIRS (/usr/include/trilinos).
if(Kokkos_VERSION VERSION_LESS 4 AND Kokkos_INCLUDE_DIRS)
  get_filename_component(_spattn_kokkos_inc "${Kokkos_INCLUDE_DIRS}" REALPATH)
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_spattn_kokkos_inc}")
endif()
message(STATUS "spattn: Kokkos ${Kokkos_VERSION} from ${Kokkos_DIR}")
# AMD GPUs (SPATTN_ENABLE_HIP): the Kokkos found must have HIP. With a HIP Kokkos, the backend's sources must be
# compiled by Kokkos' compiler (hipcc); a CUDA Kokkos routes them through nvcc_wrapper on its own, a HIP one only when
# asked: kokkos_compilation(GLOBAL) sends every compile and link line that carries Kokkos' KOKKOS_DEPENDENCE flag to
# hipcc, and leaves the rest (core, reference, tests) to CMAKE_CXX_COMPILER.
if(SPATTN_ENABLE_HIP AND NOT "HIP" IN_LIST Kokkos_DEVICES)
  message(FATAL_ERROR "SPATTN_ENABLE_HIP=ON needs a Kokkos built with Kokkos_ENABLE_HIP (found devices: ${Kokkos_DEVICES} "
                      "in ${Kokkos_DIR}); build one as in ../shared/deps/README.md and pass -DKokkos_ROOT=<its install>")
endif()
if("HIP" IN_LIST Kokkos_DEVICES)
  set(SPATTN_KOKKOS_HIP ON)
  if(NOT CMAKE_CXX_COMPILER MATCHES "hipcc")
    kokkos_compilation(GLOBAL)
  endif()
  message(STATUS "spattn: Kokkos HIP for ${Kokkos_ARCH}")
endif()

