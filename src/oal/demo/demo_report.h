#pragma once
// The report `oal demo` prints: a sequence of sections, each with notes, a table of
// formatted cells and the same numbers as JSON. Sections are produced by library
// functions (demo_operator.h, and later model / analysis / fidelity sections); the CLI
// only prints them.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace oal::demo {

struct DemoSection {
  std::string title;
  std::vector<std::string> notes;               // provenance, settings, caveats
  std::vector<std::string> columns;             // table header
  std::vector<std::vector<std::string>> rows;   // formatted cells, one row per entry
  nlohmann::json data = nlohmann::json::object();  // machine-readable numbers
};

struct DemoReport {
  std::vector<DemoSection> sections;
  // {"sections": [{"title", "notes", "columns", "rows", "data"}, ...]}
  nlohmann::json to_json() const;
  // Markdown: "## title", notes as lines, then a pipe table.
  std::string to_markdown() const;
};

}  // namespace oal::demo
