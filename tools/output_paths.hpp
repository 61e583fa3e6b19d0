// Output files of the program are checked before any long work starts: a run or a calibration must not
// compute for minutes and then fail to write its result.
#pragma once

#include <string>

namespace spattn::cli {

/// Throws spattn::Error "<option> '<path>': cannot write there (…)" unless a file at `path` can be created or
/// overwritten now. Probes by opening it for appending; a file the probe created is removed again. An empty
/// path (option not given) passes.
void require_writable(const std::string& path, const char* option);

}  // namespace spattn::cli
