#include "oal/demo/demo_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace oal::demo {

nlohmann::json DemoReport::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : sections)
    out.push_back({{"title", s.title}, {"notes", s.notes}, {"columns", s.columns},
                   {"rows", s.rows}, {"data", s.data}});
  return {{"sections", out}};
}

std::string DemoReport::to_markdown() const {
  std::string md;
  for (const auto& s : sections) {
    md += fmt::format("## {}\n\n", s.title);
    for (const auto& n : s.notes) md += n + "\n";
    if (!s.notes.empty()) md += "\n";
    if (s.columns.empty()) continue;
    std::vector<size_t> width(s.columns.size());
    for (size_t c = 0; c < s.columns.size(); ++c) {
      width[c] = s.columns[c].size();
      for (const auto& r : s.rows)
        if (c < r.size()) width[c] = std::max(width[c], r[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string l = "|";
      for (size_t c = 0; c < width.size(); ++c)
        l += fmt::format(" {:<{}} |", c < cells.size() ? cells[c] : "", width[c]);
      return l + "\n";
    };
    md += line(s.columns);
    std::string sep = "|";
    for (size_t w : width) sep += std::string(w + 2, '-') + "|";
    md += sep + "\n";
    for (const auto& r : s.rows) md += line(r);
    md += "\n";
  }
  return md;
}

}  // namespace oal::demo
