#include "fuzz_input.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace oal::fuzz {
namespace fs = std::filesystem;

std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = rest.find(k_part_separator);
    if (at == std::string_view::npos) break;
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + k_part_separator.size());
  }
  parts.push_back(rest);
  return parts;
}

bool verbose() {
  static const bool on = std::getenv("OAL_FUZZ_VERBOSE") != nullptr;
  return on;
}

namespace {

fs::path& scratch_root() {
  static fs::path root = [] {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                       : fs::temp_directory_path();
    std::string tmpl = (base / "oal-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("fuzz: cannot create " + tmpl);
    std::atexit([] { std::error_code ec; fs::remove_all(scratch_root(), ec); });
    return fs::path(tmpl);
  }();
  return root;
}

}  // namespace

fs::path fresh_dir() {
  const fs::path dir = scratch_root() / "in";
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& dir, const std::string& name, std::string_view bytes) {
  const fs::path path = dir / name;
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write " + path.string());
}

void write_parts(const fs::path& dir, const uint8_t* data, size_t size,
                 const std::vector<std::string>& names) {
  const auto parts = split_parts(data, size, names.size());
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty()) write_file(dir, names[i], parts[i]);
}

}  // namespace oal::fuzz
