#include "output_paths.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "spattn/error.hpp"

namespace spattn::cli {

void require_writable(const std::string& path, const char* option) {
  if (path.empty()) return;
  std::error_code ec;
  require(!std::filesystem::is_directory(path, ec), option, " '", path, "': is a directory");
  const bool existed = std::filesystem::exists(path, ec);
  errno = 0;
  const bool ok = std::ofstream(path, std::ios::binary | std::ios::app).is_open();
  const int error = errno;
  if (!existed) std::filesystem::remove(path, ec);
  require(ok, option, " '", path, "': cannot write there (", error != 0 ? std::strerror(error) : "cannot open", ")");
}

}  // namespace spattn::cli
