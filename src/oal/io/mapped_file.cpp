#include "oal/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "oal/core/error.h"

namespace oal::io {

std::shared_ptr<MappedFile> MappedFile::open(const std::filesystem::path& path,
                                             const std::string& op) {
  int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0, op, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(op, "{}: expected a regular file", path.string());
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    check(p != MAP_FAILED, op, "{}: mmap of {} bytes failed: {}", path.string(), f->size_,
          std::strerror(err));
    f->data_ = static_cast<uint8_t*>(p);
  } else {
    ::close(fd);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

at::Tensor view_tensor(const std::shared_ptr<MappedFile>& file, uint64_t offset,
                       at::ScalarType dtype, const std::vector<int64_t>& shape) {
  const auto opts = at::TensorOptions().dtype(dtype).device(at::kCPU);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return at::empty(shape, opts);
  const uint64_t esize = c10::elementSize(dtype);
  uint8_t* ptr = file->mutable_data() + offset;
  if (reinterpret_cast<uintptr_t>(ptr) % esize != 0) {
    at::Tensor t = at::empty(shape, opts);
    std::memcpy(t.data_ptr(), ptr, static_cast<size_t>(numel) * esize);
    return t;
  }
  // The deleter owns a reference to the mapping: the view keeps the file mapped.
  auto keep = file;
  return at::from_blob(ptr, shape, [keep](void*) mutable { keep.reset(); }, opts);
}

}  // namespace oal::io
