#pragma once
// The chat page `oal serve` answers at GET / (src/oal/serve/chat_page.html, compiled in:
// one HTML file with its CSS and JavaScript, no external resources).
#include <string_view>

namespace oal::serve {

std::string_view chat_page_html();

}  // namespace oal::serve
