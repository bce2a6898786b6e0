//===- Sha256.cpp - SHA-256 digests ---------------------------------------===//
//
// Sha256 on OpenSSL's EVP digest interface. A failing EVP call (no memory,
// or a FIPS-only provider configuration that refuses the algorithm) throws
// Error with OpenSSL's reason, so a cache key is never computed from a
// half-updated context.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Sha256.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace ztc::rt {

namespace {

/// Throws Error for the failed EVP `call`, with the reason OpenSSL queued.
[[noreturn]] void throwEvpError(const char *call) {
  std::string message = std::string("SHA-256: ") + call + " failed";
  if (unsigned long code = ERR_get_error()) {
    char reason[256];
    ERR_error_string_n(code, reason, sizeof reason);
    message += std::string(": ") + reason;
  }
  ERR_clear_error();
  throw Error(message);
}

} // namespace

void Sha256::ContextDeleter::operator()(evp_md_ctx_st *context) const {
  EVP_MD_CTX_free(context);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_)
    throwEvpError("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
    throwEvpError("EVP_DigestInit_ex");
}

void Sha256::update(const void *data, size_t size) {
  if (EVP_DigestUpdate(context_.get(), data, size) != 1)
    throwEvpError("EVP_DigestUpdate");
}

std::string Sha256::hexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest, &length) != 1)
    throwEvpError("EVP_DigestFinal_ex");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

std::string sha256Hex(const std::string &text) {
  Sha256 hash;
  hash.update(text);
  return hash.hexDigest();
}

std::string sha256File(const std::string &path) {
  std::ifstream in(requireRegularFile(path), std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  Sha256 hash;
  std::vector<char> piece(1 << 20);
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    hash.update(piece.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad())
    throw Error(path + ": read error: " + std::strerror(errno));
  return hash.hexDigest();
}

} // namespace ztc::rt
