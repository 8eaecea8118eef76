// The translation unit CMake builds the precompiled ATen header for (CMakeLists.txt,
// oal_pch): it holds nothing itself.
