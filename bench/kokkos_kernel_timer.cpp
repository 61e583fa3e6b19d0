// Where the Kokkos backend's time goes on a GPU: a Kokkos Tools library that times every Kokkos kernel and deep copy by
// its label (spattn's kernels are labelled "spattn::kokkos::<step>"). Load it into any program that runs the Kokkos
// backend, e.g.
//   KOKKOS_TOOLS_LIBS=$PWD/libspattn_kokkos_timer.so WORKLOAD=llm ARMS=sparge ./spattn_bench_e2e 32768
// and it prints, when Kokkos finalizes, each label's total wall time, calls and time per call, largest first.
// Each kernel is bracketed by cudaDeviceSynchronize, so a label's time is its own (nothing else runs on the device
// meanwhile) and the program as a whole runs slower than without the tool: compare totals with untimed runs.
// No Kokkos header: the Tools interface is C functions that Kokkos looks up by name in the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Total {
  double ms = 0;
  std::int64_t calls = 0;
};

// Never destroyed: Kokkos finalizes from an exit handler (spattn registers one at first use), which may run after the
// destructors of statics constructed later, i.e. at the first kernel.
std::map<std::string, Total>& totals() {
  static auto* t = new std::map<std::string, Total>;
  return *t;
}

std::map<std::uint64_t, std::pair<std::string, Clock::time_point>>& running() {
  static auto* r = new std::map<std::uint64_t, std::pair<std::string, Clock::time_point>>;
  return *r;
}

std::uint64_t next_id = 0;
std::string* copy_label = new std::string;
Clock::time_point copy_start;

void begin(const char* kind, const char* name, std::uint64_t* id) {
  cudaDeviceSynchronize();
  *id = next_id++;
  running()[*id] = {std::string(kind) + " " + name, Clock::now()};
}

void end(std::uint64_t id) {
  cudaDeviceSynchronize();
  const auto it = running().find(id);
  if (it == running().end()) return;
  Total& t = totals()[it->second.first];
  t.ms += std::chrono::duration<double, std::milli>(Clock::now() - it->second.second).count();
  ++t.calls;
  running().erase(it);
}

}  // namespace

extern "C" {

/// Kokkos_Profiling_SpaceHandle: a memory space's name.
struct SpattnSpaceHandle {
  char name[64];
};

void kokkosp_init_library(int, std::uint64_t, std::uint32_t, void*) {}

void kokkosp_finalize_library() {
  std::vector<std::pair<std::string, Total>> rows(totals().begin(), totals().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& r : rows) all += r.second.ms;
  std::printf("\nkokkos-timer: %zu labels, %.3f ms in all (each kernel synchronised)\n", rows.size(), all);
  std::printf("kokkos-timer: %10s %7s %10s %6s  %s\n", "total ms", "calls", "ms/call", "share", "label");
  for (const auto& [label, t] : rows)
    std::printf("kokkos-timer: %10.3f %7lld %10.4f %5.1f%%  %s\n", t.ms, static_cast<long long>(t.calls),
                t.ms / static_cast<double>(t.calls), all > 0 ? 100.0 * t.ms / all : 0.0, label.c_str());
  std::fflush(stdout);
}

void kokkosp_begin_parallel_for(const char* name, std::uint32_t, std::uint64_t* id) { begin("for", name, id); }
void kokkosp_end_parallel_for(std::uint64_t id) { end(id); }
void kokkosp_begin_parallel_reduce(const char* name, std::uint32_t, std::uint64_t* id) { begin("reduce", name, id); }
void kokkosp_end_parallel_reduce(std::uint64_t id) { end(id); }
void kokkosp_begin_parallel_scan(const char* name, std::uint32_t, std::uint64_t* id) { begin("scan", name, id); }
void kokkosp_end_parallel_scan(std::uint64_t id) { end(id); }

void kokkosp_begin_deep_copy(SpattnSpaceHandle dst, const char* dst_name, const void*, SpattnSpaceHandle src,
                             const char* src_name, const void*, std::uint64_t) {
  cudaDeviceSynchronize();
  *copy_label = std::string("deep_copy ") + src.name + " -> " + dst.name + " (" + dst_name + " <- " + src_name + ")";
  copy_start = Clock::now();
}

void kokkosp_end_deep_copy() {
  cudaDeviceSynchronize();
  Total& t = totals()[*copy_label];
  t.ms += std::chrono::duration<double, std::milli>(Clock::now() - copy_start).count();
  ++t.calls;
}

}  // extern "C"
