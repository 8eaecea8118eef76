#include "oal/serve/chat_page.h"

namespace oal::serve {

std::string_view chat_page_html() {
  // The page as a raw string literal, generated from chat_page.html by CMakeLists.txt.
  static constexpr std::string_view page =
#include "oal/serve/chat_page_html.inc"
      ;
  return page;
}

}  // namespace oal::serve
