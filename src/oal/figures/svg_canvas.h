#pragma once
// A minimal SVG document builder shared by the chart writers (svg_bars, svg_heatmap):
// shapes and text in user units, escaped text, fixed number formatting so output is
// byte-identical across runs.
#include <string>
#include <string_view>

namespace oal::figures {

// Categorical colours (colour-blind-safe Okabe–Ito order) and a neutral grey.
std::string_view palette_color(int index);
inline constexpr std::string_view k_grey = "#9e9e9e";

// "1.23", "1.2e-05": compact numbers for labels.
std::string format_number(double v);

// `<`, `>`, `&`, `"` escaped for SVG text and attributes.
std::string svg_escape(std::string_view text);

class SvgCanvas {
 public:
  SvgCanvas(double width, double height);
  void rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view title = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke = "#000",
            double width = 1.0);
  // anchor: "start" | "middle" | "end"; rotate: degrees about (x, y).
  void text(double x, double y, std::string_view s, double size = 11,
            std::string_view anchor = "start", double rotate = 0, bool bold = false);
  void polyline(const std::string& points, std::string_view stroke, double width = 1.5);
  void circle(double cx, double cy, double r, std::string_view fill);
  // The complete document.
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace oal::figures
