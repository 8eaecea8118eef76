#include "oal/attention/softmax/kv_cache_type.h"

#include "oal/core/error.h"

namespace oal::attn {

KvCacheType parse_kv_cache_type(std::string_view name) {
  if (name == "f32") return KvCacheType::f32;
  if (name == "f16") return KvCacheType::f16;
  if (name == "q8_0") return KvCacheType::q8_0;
  fail("kv_cache_type", "unknown KV cache type '{}': expected f32, f16 or q8_0", name);
}

std::string_view kv_cache_type_name(KvCacheType type) {
  switch (type) {
    case KvCacheType::f16: return "f16";
    case KvCacheType::q8_0: return "q8_0";
    default: return "f32";
  }
}

}  // namespace oal::attn
