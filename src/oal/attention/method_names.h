#pragma once
// The registered method names (registry.h), for code that means one method in particular:
// a method class's name(), the demo's tour, calibrators, bench variants. Every other
// place takes names from the registry; these are the only spellings in the code.
namespace oal::attn::names {

inline constexpr const char* softmax = "softmax";
inline constexpr const char* oal = "oal";
inline constexpr const char* global = "global";
inline constexpr const char* taylorshift = "taylorshift";
inline constexpr const char* performer = "performer";
inline constexpr const char* dijiang = "dijiang";
inline constexpr const char* spectraformer = "spectraformer";
inline constexpr const char* window = "window";

}  // namespace oal::attn::names
