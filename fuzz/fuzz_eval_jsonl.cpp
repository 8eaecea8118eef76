// Local JSONL data for `oal eval`: the first byte picks the task (PIQA, HellaSwag,
// ARC-Easy), the rest is the file.
#include "fuzz_input.h"
#include "oal/eval/multiple_choice.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr oal::eval::McTask k_tasks[] = {
      oal::eval::McTask::piqa, oal::eval::McTask::hellaswag, oal::eval::McTask::arc_easy};
  const auto task = k_tasks[data[0] % 3];
  const auto dir = oal::fuzz::fresh_dir();
  oal::fuzz::write_file(dir, "data.jsonl", oal::fuzz::as_bytes(data + 1, size - 1));
  oal::fuzz::expect_only_oal_errors([&] { (void)oal::eval::load_mc_examples(task, dir / "data.jsonl"); });
  return 0;
}
