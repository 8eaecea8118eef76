// The tokenizer of a checkpoint: found beside it (an HF directory's tokenizer.json) or
// named by --tokenizer, and opened in one call (formats::open_tokenizer), as every
// command that takes --model opens it.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/text/tokenizer.h"

namespace oal::formats {
namespace {

namespace fs = std::filesystem;

TEST(FindTokenizer, OpensTheTokenizerBesideAnHfDirectory) {
  const fs::path dir = test::test_dir("find_tokenizer", "hf");
  fixtures::write_synthetic_model(dir, {});
  EXPECT_EQ(find_tokenizer(dir), dir / "tokenizer.json");
  // The same file loaded directly: the same ids for a text (the synthetic tokenizer is a
  // real byte-level BPE, so the ids are not trivially equal by construction).
  const auto opened = open_tokenizer(dir);
  const auto direct = text::load_tokenizer(dir / "tokenizer.json");
  const std::string s = "Once upon a time, 42 tokens.";
  EXPECT_EQ(opened->encode(s, false), direct->encode(s, false));
  EXPECT_FALSE(opened->encode(s, false).empty());
  // An explicit path wins over the one beside the model.
  EXPECT_EQ(find_tokenizer(dir / "config.json", dir / "tokenizer.json"), dir / "tokenizer.json");
}

TEST(FindTokenizer, MissingModelOrTokenizerIsANamedError) {
  const fs::path dir = test::test_dir("find_tokenizer", "missing");
  fs::create_directories(dir);
  try {
    open_tokenizer(dir / "nope");
    FAIL() << "no error for a missing model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[model]"), std::string::npos) << e.what();
  }
  try {
    open_tokenizer(dir);
    FAIL() << "no error for a directory without a tokenizer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(open_tokenizer(dir, dir / "absent.json"), Error);
}

}  // namespace
}  // namespace oal::formats
