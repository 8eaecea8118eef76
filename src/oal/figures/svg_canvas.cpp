#include "oal/figures/svg_canvas.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace oal::figures {

std::string_view palette_color(int index) {
  static constexpr std::array<std::string_view, 8> k_colors{
      "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"};
  return k_colors[static_cast<size_t>(((index % 8) + 8) % 8)];
}

std::string format_number(double v) {
  if (v == 0.0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e-3 && a < 1e5) {
    std::string s = fmt::format("{:.3f}", v);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  }
  return fmt::format("{:.2e}", v);
}

std::string svg_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

SvgCanvas::SvgCanvas(double width, double height) : width_(width), height_(height) {}

void SvgCanvas::rect(double x, double y, double w, double h, std::string_view fill,
                     std::string_view title) {
  body_ += fmt::format(R"(<rect x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}")", x,
                       y, std::max(w, 0.0), std::max(h, 0.0), fill);
  if (title.empty()) {
    body_ += "/>\n";
  } else {
    body_ += fmt::format("><title>{}</title></rect>\n", svg_escape(title));
  }
}

void SvgCanvas::line(double x1, double y1, double x2, double y2, std::string_view stroke,
                     double width) {
  body_ += fmt::format(
      R"(<line x1="{:.2f}" y1="{:.2f}" x2="{:.2f}" y2="{:.2f}" stroke="{}" stroke-width="{:.2f}"/>)"
      "\n",
      x1, y1, x2, y2, stroke, width);
}

void SvgCanvas::text(double x, double y, std::string_view s, double size, std::string_view anchor,
                     double rotate, bool bold) {
  body_ += fmt::format(R"(<text x="{:.2f}" y="{:.2f}" font-size="{:.1f}" text-anchor="{}")", x, y,
                       size, anchor);
  if (rotate != 0)
    body_ += fmt::format(R"svg( transform="rotate({:.1f} {:.2f} {:.2f})")svg", rotate, x, y);
  if (bold) body_ += R"( font-weight="bold")";
  body_ += fmt::format(">{}</text>\n", svg_escape(s));
}

void SvgCanvas::polyline(const std::string& points, std::string_view stroke, double width) {
  body_ += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{:.2f}"/>)"
                       "\n",
                       points, stroke, width);
}

void SvgCanvas::circle(double cx, double cy, double r, std::string_view fill) {
  body_ += fmt::format(R"(<circle cx="{:.2f}" cy="{:.2f}" r="{:.2f}" fill="{}"/>)"
                       "\n",
                       cx, cy, r, fill);
}

std::string SvgCanvas::str() const {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" font-family="sans-serif">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n",
      width_, height_, width_, height_, body_);
}

}  // namespace oal::figures
