// oal finetune refuses to validate on blocks it trains on: one file for --train and
// --val with overlapping block ranges (the defaults "all" and ":32" among them) is an
// error before any model is loaded; disjoint ranges, or two files, pass this check.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/train/finetune_run.h"

using namespace oal;

namespace {
std::string error_of(train::FinetuneRunOptions o) {
  try {
    train::run_finetune(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(FinetuneBlocks, OverlappingTrainAndValidationBlocksOfOneFileAreRefused) {
  const auto dir = test::make_temp_dir("finetune_blocks");
  test::write_file(dir / "t.txt", "some text");
  test::write_file(dir / "v.txt", "other text");
  train::FinetuneRunOptions o;
  o.convert.model = (dir / "no-model").string();  // never reached when the blocks overlap
  o.convert.out = (dir / "run").string();
  o.train_text = dir / "t.txt";
  o.val_text = dir / "t.txt";
  EXPECT_NE(error_of(o).find("the blocks overlap (train 'all', val ':32')"), std::string::npos) << error_of(o);
  o.train_blocks = "20:";
  o.val_blocks = "0-20";
  EXPECT_NE(error_of(o).find("the blocks overlap"), std::string::npos);
  // Disjoint ranges, or another file: this check passes and the missing model is next.
  o.val_blocks = "0:20";
  EXPECT_NE(error_of(o).find("model '"), std::string::npos) << error_of(o);
  o.val_blocks = ":32";
  o.train_blocks = "all";
  o.val_text = dir / "v.txt";
  EXPECT_NE(error_of(o).find("model '"), std::string::npos) << error_of(o);
}
