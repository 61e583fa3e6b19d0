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
