#pragma once
// The checkpoint file's envelope, without Torch: the LibTorch archive (a zip) framed by a header and a
// trailer that carries the archive's length and CRC32, so that a flipped bit anywhere in the file is
// found before the parameters are used. Inside, the archive also holds a CRC32 per tensor
// ("checksums"), which names the damaged tensor. Layout:
//   "VITSIMCK" u32 version (1)  |  archive bytes  |  u64 archive length  u32 CRC32(archive)  "VCKE"
// all integers little-endian. A file that starts with the zip signature "PK\3\4" is a checkpoint of an
// older vitsim (no envelope): it is accepted with a warning, since nothing in it can be verified.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vitsim/core/base/io.hpp"

namespace vitsim::real {

// Writes the envelope around what `archive` streams into its sink (the archive's CRC32 and length are
// computed on the way, so the archive is never held in memory twice).
void write_checkpoint_envelope(const ChunkSink& sink, const std::function<void(const ChunkSink&)>& archive);

struct CheckpointBytes {
  std::vector<char> file;       // the whole file
  size_t offset = 0, size = 0;  // the archive inside it
  bool legacy = false;          // an older vitsim's bare archive, no checksum
  std::string damage;           // "" when the envelope verified; else what is wrong with it (the caller
                                // then looks for the damaged tensor to name it)
};
// Reads a checkpoint file and checks its envelope. Throws Error for a file that is neither an envelope
// nor a bare archive, or too short to be one.
CheckpointBytes read_checkpoint_envelope(const std::string& path);

// CRC32 (zlib) of a byte range, for the per-tensor checksums.
uint32_t crc32_of(const void* data, size_t size);

}  // namespace vitsim::real
