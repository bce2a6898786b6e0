//===- Sha256.h - SHA-256 digests -------------------------------*- C++ -*-===//
//
// FIPS 180-4 SHA-256, used to key the compiled-object cache by content: a
// collision would silently run the wrong code, so the key is a cryptographic
// hash rather than a fast 64-bit one.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_SHA256_H
#define ZTC_RUNTIME_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ztc::rt {

/// Incremental SHA-256.
class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  void update(const std::string &text) { update(text.data(), text.size()); }
  /// The digest as 64 lowercase hex digits; the object must not be updated
  /// afterwards.
  std::string hexDigest();

private:
  void compress(const uint8_t *block);

  std::array<uint32_t, 8> state_;
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t totalBytes_ = 0;
};

/// SHA-256 of `text` as hex.
std::string sha256Hex(const std::string &text);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SHA256_H
