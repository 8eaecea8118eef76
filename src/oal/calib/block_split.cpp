#include "oal/calib/block_split.h"

#include <algorithm>
#include <set>

#include "oal/core/error.h"
#include "oal/core/ranges.h"

namespace oal::calib {

void BlockSplit::validate(int64_t available) const {
  constexpr std::string_view op = "block_split";
  std::set<int64_t> seen;
  auto add = [&](const std::vector<int64_t>& set, const char* name) {
    check(!set.empty(), op, "the {} block set is empty", name);
    for (int64_t b : set) {
      check(b >= 0, op, "{} block index {} is negative", name, b);
      check(b < available, op,
            "{} block {} does not exist: the text gives only {} complete blocks (need {})",
            name, b, available, blocks_needed());
      check(seen.insert(b).second, op,
            "block {} appears twice (train {}, val {}, eval {} must not overlap)", b,
            format_index_list(train), format_index_list(val), format_index_list(eval));
    }
  };
  add(train, "train");
  add(val, "validation");
  add(eval, "evaluation");
}

int64_t BlockSplit::blocks_needed() const {
  int64_t m = -1;
  for (const auto* s : {&train, &val, &eval})
    for (int64_t b : *s) m = std::max(m, b);
  return m + 1;
}

}  // namespace oal::calib
