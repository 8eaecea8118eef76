#pragma once
// A whole file mapped into memory (POSIX mmap, MAP_PRIVATE). Pages are mapped
// read/write copy-on-write: a tensor view that is modified in place changes only this
// process's copy, never the file, and does not crash on a read-only page.
// Tensors created over the mapping hold a shared_ptr to it (see view_tensor), so the
// mapping lives as long as any view does.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace oal::io {

class MappedFile {
 public:
  // Maps `path`; `op` names the operation in error messages ("safetensors", ...).
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path, const std::string& op);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint8_t* mutable_data() { return data_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// A CPU tensor of `dtype` and `shape` viewing `file` bytes [offset, offset + nbytes).
// Zero-copy when the offset is aligned for the element type; otherwise (an unaligned
// tensor inside a safetensors file) the bytes are copied into a fresh tensor.
// The caller has validated that the byte range lies inside the file.
at::Tensor view_tensor(const std::shared_ptr<MappedFile>& file, uint64_t offset,
                       at::ScalarType dtype, const std::vector<int64_t>& shape);

}  // namespace oal::io
