//===- Sha256.h - SHA-256 digests -------------------------------*- C++ -*-===//
//
// SHA-256, used to key the compiled-object cache by content: a collision
// would silently run the wrong code, so the key is a cryptographic hash
// rather than a fast 64-bit one. OpenSSL's libcrypto computes it; this
// header keeps OpenSSL out of its includers.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_SHA256_H
#define ZTC_RUNTIME_SHA256_H

#include <cstddef>
#include <memory>
#include <string>

// OpenSSL's EVP_MD_CTX (openssl/types.h), declared here so that includers
// need no OpenSSL headers.
struct evp_md_ctx_st;

namespace ztc::rt {

/// Incremental SHA-256. Throws Error when OpenSSL fails.
class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  void update(const std::string &text) { update(text.data(), text.size()); }
  /// Adds `size` bytes preceded by their count, so that consecutive fields
  /// cannot run together (a key over several strings).
  void updateField(const void *data, size_t size) {
    update(std::to_string(size) + ":");
    update(data, size);
  }
  void updateField(const std::string &text) {
    updateField(text.data(), text.size());
  }
  /// The digest as 64 lowercase hex digits; ends the hash: the object must
  /// not be used afterwards.
  std::string hexDigest();

private:
  struct ContextDeleter {
    void operator()(evp_md_ctx_st *context) const;
  };
  std::unique_ptr<evp_md_ctx_st, ContextDeleter> context_;
};

/// SHA-256 of `text` as hex.
std::string sha256Hex(const std::string &text);

/// The SHA-256 of the file at `path`, read in pieces (memory stays small
/// whatever its size). Throws Error naming the file when it cannot be read.
std::string sha256File(const std::string &path);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SHA256_H
