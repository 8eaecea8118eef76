// Hostile llama2.c headers (found by fuzz/fuzz_llama2c_model): every field within
// 1..2^24 yet products far beyond 64 bits. The expected size used to be summed in
// int64 (signed overflow, UB), so such a header could imply a wrapped, small size.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/formats/llama2c.h"
#include "oal/formats/load.h"

using oal::formats::llama2c_expected_size;
using oal::formats::Llama2cHeader;

namespace {

std::string message_of(const Llama2cHeader& h) {
  try {
    llama2c_expected_size(h, "hostile.bin");
  } catch (const oal::Error& e) {
    return e.what();
  }
  return "no error";
}

constexpr int32_t k_big = 1 << 24;  // the largest field the reader accepts

}  // namespace

TEST(Llama2cHeader, RealShapeGivesTheFileSize) {
  // stories260K (../shared/data/README.md): its file has 1,056,540 bytes.
  EXPECT_EQ(llama2c_expected_size({64, 172, 5, 8, 4, 512, 512}, "stories260K.bin"), 1056540u);
  // Untied classifier: vocab x dim more floats.
  EXPECT_EQ(llama2c_expected_size({64, 172, 5, 8, 4, -512, 512}, "x.bin"),
            1056540u + 512u * 64u * 4u);
}

TEST(Llama2cHeader, HugeProductsAreNamedErrorsNotWrappedSizes) {
  // layers x dim x dim = 2^72 floats.
  const std::string m = message_of({k_big, k_big, k_big, 2, 1, k_big, k_big});
  EXPECT_NE(m.find("[llama2c]"), std::string::npos) << m;
  EXPECT_NE(m.find("more than 2^60 floats"), std::string::npos) << m;
  // Just over 2^60 with modest fields: 3 x L x f x d = 3 x 2^20 x 2^20 x 2^20 > 2^60.
  const std::string m2 = message_of({1 << 20, 1 << 20, 1 << 20, 2, 1, 2, 2});
  EXPECT_NE(m2.find("more than 2^60 floats"), std::string::npos) << m2;
}

TEST(Llama2cHeader, LoadingAHostileHeaderFailsCleanly) {
  const auto dir = oal::test::make_temp_dir("llama2c_header");
  const Llama2cHeader h{k_big, k_big, k_big, 2, 1, -k_big, k_big};
  oal::test::write_file(dir / "hostile.bin",
                        std::string(reinterpret_cast<const char*>(&h), sizeof h));
  try {
    oal::formats::load_model((dir / "hostile.bin").string());
    FAIL() << "a hostile header loaded";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("2^60"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
