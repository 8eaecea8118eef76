#pragma once
// The element type of a SoftmaxKvCache's kernel storage: f32 (exact, the default), f16
// (IEEE half, llama.cpp's default cache type: half the memory and bandwidth per cached
// token; the cached keys and values carry the half rounding, 2^-11 relative) or q8_0
// (llama.cpp's q8_0 cache type: 8.5 bits per value, each token's key and value rows
// quantized per 32 values as they are appended, up to 1/254 of a block's largest value
// of rounding; head dimensions must be multiples of 32). The attention arithmetic stays
// fp32 in every case.
#include <string>
#include <string_view>

namespace oal::attn {

enum class KvCacheType { f32, f16, q8_0 };

// "f32" | "f16" | "q8_0"; anything else throws oal::Error naming the accepted values.
KvCacheType parse_kv_cache_type(std::string_view name);
std::string_view kv_cache_type_name(KvCacheType type);

}  // namespace oal::attn
