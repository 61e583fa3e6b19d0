// `spattn check`: another kernel's attention output (.npy) against spattn's definitions — spattn/check.hpp's
// checker, the report of spattn.testing.check_attention; exit status 0 when it passes, 1 when it fails.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace spattn::cli {

struct CheckOptions {
  std::string q, k, v, out, mask, layout = "bhnd";
  bool bf16 = false, causal = false;
  std::optional<float> scale;
  double factor = 2.0;
  std::optional<double> atol;
};

/// Adds the `check` subcommand to `app`, its options bound to `options` (which must outlive the parse).
void add_check_command(CLI::App& app, CheckOptions& options);

/// Reads the files, checks, prints the report on stdout; 0: passed, 1: failed. Throws spattn::Error on bad input.
int run_check(const CheckOptions& options);

}  // namespace spattn::cli
