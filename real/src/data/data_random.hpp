#pragma once
// The source of every random decision in the data path (internal to real/): splitmix64, the same on every
// platform and standard library.
#include <cstdint>

namespace vitsim::real::data_random {

// splitmix64: a tiny, well-mixed hash; the source of every random decision in the data path.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline uint64_t key(uint64_t seed, uint64_t a, uint64_t b) {
  return mix(mix(mix(seed) ^ a) ^ b);
}

}  // namespace vitsim::real::data_random
