#pragma once
// Flash-style causal softmax attention on the CPU (exact softmax, online over key
// blocks), with grouped-query attention. The tensor entry points are
// attention/softmax/softmax.h (softmax_attention_flash) and SoftmaxAttention / SoftmaxKvCache
// (attention/softmax/softmax_method.h); this is the raw kernel.
#include <cstdint>

#include "oal/simd/attention_dims.h"

namespace oal::simd {

struct FlashOptions {
  int64_t q_block = 64;  // query rows per work item
  // Keys per online-softmax step. 256, not 64: a step's fixed costs per query row (two
  // horizontal reductions, a scalar exp, rescaling the row's output, loading and storing
  // it around the value GEMM) are then spread over 4x the keys. Measured on AMD EPYC
  // (2 threads, fp32, N = 1K/4K/16K): 64 -> 256 raised the kernel from 54-62 % to 66-73 %
  // of its own GEMM shapes' rate on AVX-512 and from 51-56 % to 67-72 % on AVX2.
  int64_t k_block = 256;
  int threads = 0;       // 0 = ATen's thread count
};

// How a call is cut into work items: `heads` query heads of one KV group stacked over a
// query block of `block` positions (several heads only when T is shorter than q_block,
// e.g. decode), so each item's score GEMM is (block · heads) x min(k_block, S) x D and its
// value GEMM (block · heads) x Dv x min(k_block, S). oal bench's GEMM model reads it.
struct FlashTiling {
  int64_t heads = 1, block = 64;
};
FlashTiling flash_tiling(const AttentionDims& dims, const FlashOptions& opt);

// y = softmax(scale · q kᵀ + causal mask) v per query head; fp32 in/out, contiguous
// (see AttentionDims), fp32 accumulation. Work items are (batch, head, query block),
// handed out longest first. Scratch: one Kᵀ copy per KV head plus O(q_block · (k_block
// + Dv)) per worker. Requires T >= 1 rows to have at least one visible key (always true
// for causal attention with S >= T).
void flash_softmax_f32(const AttentionDims& dims, const float* q, const float* k,
                       const float* v, float* y, float scale, const FlashOptions& opt = {});

// The same with keys given transposed: kt holds, per KV head (batch-major), D rows of
// ldkt floats (ldkt >= S), row r = dimension r of keys 0..S-1 — the layout a decode KV
// cache keeps so a step never re-transposes the cache. When T is shorter than q_block,
// the query heads of one KV head are stacked into one work item (decode: all of them).
// v likewise holds v_rows >= S rows of Dv floats per KV head (a cache's capacity).
void flash_softmax_kt_f32(const AttentionDims& dims, const float* q, const float* kt,
                          int64_t ldkt, const float* v, int64_t v_rows, float* y, float scale,
                          const FlashOptions& opt = {});

// The same on a KV cache held in IEEE half (binary16, as uint16_t bits; llama.cpp's default
// f16 cache): kt and v laid out as above, 2 bytes per element. Work items of a few rows
// (decode) hand the halves to GEMMs that widen B as they load it (gemm_f32_half_b);
// larger ones widen each key block into fp32 scratch once and reuse it. The cache takes
// half the memory and bandwidth and the arithmetic stays fp32; only the cached keys and
// values carry the half rounding (relative 2^-11).
void flash_softmax_kt_f16(const AttentionDims& dims, const float* q, const uint16_t* kt,
                          int64_t ldkt, const uint16_t* v, int64_t v_rows, float* y, float scale,
                          const FlashOptions& opt = {});

// The same on a KV cache held as Q8_0 (llama.cpp's q8_0 cache type, 8.5 bits per value):
// k_rows holds, per KV head (batch-major), k_cap >= S key rows of D/32 Q8_0 blocks (34
// bytes each: fp16 scale, 32 int8), each row quantized as its token was appended; v_rows
// likewise v_cap >= S value rows of Dv/32 blocks. Each key block is decoded to fp32 rows
// (the SIMD decoder of linear_quant.h) once per work item, the scores taken as K·Qsᵀ and
// transposed (a block x rows transpose), then the online softmax and the fp32 value GEMM
// run. D and Dv must be multiples of 32 (oal::Error("flash_softmax")).
void flash_softmax_q8_0(const AttentionDims& dims, const float* q, const uint8_t* k_rows,
                        int64_t k_cap, const uint8_t* v_rows, int64_t v_cap, float* y,
                        float scale, const FlashOptions& opt = {});

// A Kᵀ row stride for S keys: S rounded up to 16 floats plus 16. Rows a power-of-two
// apart (S = 1024, 4096, ... would be) all fall into the same L1 sets, so the D rows of
// a key block evict each other between the register tiles that reuse them; 64 bytes of
// padding spreads them over the sets. Measured: 7-8 % faster at N = 1K and 16K (AVX-512).
inline int64_t kt_stride(int64_t S) { return (S + 15) / 16 * 16 + 16; }

// exp(x) as the online softmax computes it (x <= 0; below -86 it returns exp(-86)), on the
// active SIMD target: exposed so tests measure its error against the C library's exp.
void softmax_exp_f32(const float* x, float* y, int64_t n);

}  // namespace oal::simd
