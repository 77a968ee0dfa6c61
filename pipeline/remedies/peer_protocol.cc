#include "pipeline/remedies/peer_protocol.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

namespace mlbench::pipeline {

void put_be32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
void put_be64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
std::uint32_t get_be32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get_be64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

namespace {

[[noreturn]] void crypto_failed(const char* what) {
  throw std::runtime_error(std::string("peer cache: ") + what + " failed (OpenSSL)");
}

// HMAC-SHA256 over the pieces given to update(), under `key`.
class Hmac {
 public:
  Hmac(const std::uint8_t* key, std::size_t size) {
    static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (!mac || !(ctx_ = EVP_MAC_CTX_new(mac))) crypto_failed("HMAC-SHA256");
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_construct_end()};
    // An empty key is refused by some providers: the secret is never empty (the server and the
    // client refuse to start without one), the session keys never are.
    if (EVP_MAC_init(ctx_, key, size, params) != 1) {
      EVP_MAC_CTX_free(ctx_);
      crypto_failed("HMAC-SHA256");
    }
  }
  ~Hmac() { EVP_MAC_CTX_free(ctx_); }
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;

  Hmac& update(const void* data, std::size_t size) {
    if (size > 0 && EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), size) != 1)
      crypto_failed("HMAC-SHA256");
    return *this;
  }
  Hmac& update(const std::string& s) { return update(s.data(), s.size()); }
  std::array<std::uint8_t, 32> final() {
    std::array<std::uint8_t, 32> out{};
    std::size_t len = 0;
    if (EVP_MAC_final(ctx_, out.data(), &len, out.size()) != 1 || len != out.size()) crypto_failed("HMAC-SHA256");
    return out;
  }

 private:
  EVP_MAC_CTX* ctx_ = nullptr;
};

Hmac keyed(const std::string& secret) {
  return Hmac(reinterpret_cast<const std::uint8_t*>(secret.data()), secret.size());
}

// HMAC-SHA256(secret, label | T). The labels of one use have one length ("client proof" and
// "server proof"; "client key" and "server key") and T has a fixed length: no two inputs of
// different meaning are the same bytes.
std::array<std::uint8_t, 32> bound(const std::string& secret, const char* label, const PeerTranscript& t) {
  static const std::string kProtocol = "mlbench-peer v2";
  std::uint8_t ranks[8];
  put_be32(ranks, t.client_rank);
  put_be32(ranks + 4, t.server_rank);
  return keyed(secret)
      .update(label, std::strlen(label))
      .update(kProtocol)
      .update(t.run.data(), t.run.size())
      .update(ranks, sizeof ranks)
      .update(t.server_nonce.data(), t.server_nonce.size())
      .update(t.client_nonce.data(), t.client_nonce.size())
      .final();
}

bool same(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

}  // namespace

PeerRunId peer_run_id(const std::string& run) {
  PeerRunId out{};
  unsigned int len = 0;
  const std::string text = "mlbench-peer run " + run;
  if (EVP_Digest(text.data(), text.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    crypto_failed("SHA-256");
  return out;
}

PeerNonce peer_nonce() {
  PeerNonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) crypto_failed("RAND_bytes");
  return n;
}

PeerProof peer_proof(const std::string& secret, PeerRole who, const PeerTranscript& t) {
  return bound(secret, who == PeerRole::kClient ? "client proof" : "server proof", t);
}

void PeerFrameMac::CipherFree::operator()(evp_cipher_ctx_st* ctx) const {
  EVP_CIPHER_CTX_free(ctx);
}

namespace {

// A GMAC context keyed with `key` (AES-256-GCM; the nonce is set per frame).
evp_cipher_ctx_st* gmac_context(const std::array<std::uint8_t, 32>& key) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    crypto_failed("AES-256-GCM");
  }
  return ctx;
}

}  // namespace

PeerFrameMac::PeerFrameMac() : gmac_(gmac_context({})) {}

PeerFrameMac::PeerFrameMac(const std::string& secret, PeerRole sender, const PeerTranscript& t)
    : gmac_(gmac_context(bound(secret, sender == PeerRole::kClient ? "client key" : "server key", t))) {}

PeerTag PeerFrameMac::tag(const std::uint8_t* header, const std::uint8_t* bytes, std::size_t size) {
  std::uint8_t nonce[12] = {};
  put_be64(nonce + 4, sequence_++);
  EVP_CIPHER_CTX* ctx = gmac_.get();
  int len = 0;
  bool ok = EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) == 1 &&
            EVP_EncryptUpdate(ctx, nullptr, &len, header, static_cast<int>(kPeerFrameHeaderBytes)) == 1;
  // Additional data only (no plaintext): in pieces an int can count.
  for (std::size_t done = 0; ok && done < size;) {
    const std::size_t piece = std::min<std::size_t>(size - done, std::size_t{1} << 30);
    ok = EVP_EncryptUpdate(ctx, nullptr, &len, bytes + done, static_cast<int>(piece)) == 1;
    done += piece;
  }
  std::uint8_t none[16];
  PeerTag out{};
  if (!ok || EVP_EncryptFinal_ex(ctx, none, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(out.size()), out.data()) != 1) {
    crypto_failed("GMAC");
  }
  return out;
}

bool PeerFrameMac::check(const std::uint8_t* header, const std::uint8_t* bytes, std::size_t size,
                         const std::uint8_t* tag) {
  const PeerTag want = this->tag(header, bytes, size);
  return same(want.data(), tag, want.size());
}

PeerSession::PeerSession(const std::string& secret, PeerRole me, const PeerTranscript& t)
    : send(secret, me, t), receive(secret, me == PeerRole::kClient ? PeerRole::kServer : PeerRole::kClient, t) {}

PeerServerHandshake::PeerServerHandshake(std::string secret, const PeerRunId& run, int rank, int world)
    : secret_(std::move(secret)), world_(world) {
  t_.run = run;
  t_.server_rank = static_cast<std::uint32_t>(rank);
  t_.server_nonce = peer_nonce();
  put_be32(hello_.data(), kPeerHelloMagic);
  put_be32(hello_.data() + 4, t_.server_rank);
  std::memcpy(hello_.data() + 8, run.data(), run.size());
  std::memcpy(hello_.data() + 8 + run.size(), t_.server_nonce.data(), t_.server_nonce.size());
}

PeerRefusal PeerServerHandshake::accept(const ClientHello& client, PeerProof& finish) {
  t_.client_rank = get_be32(client.data());
  std::memcpy(t_.client_nonce.data(), client.data() + 4, kPeerNonceBytes);
  // A connection from this node's own rank is a reflection or a relay of this node's own client.
  if (t_.client_rank == t_.server_rank || t_.client_rank >= static_cast<std::uint32_t>(world_))
    return PeerRefusal::kOwnRank;
  const PeerProof want = peer_proof(secret_, PeerRole::kClient, t_);
  if (!same(want.data(), client.data() + 4 + kPeerNonceBytes, want.size())) return PeerRefusal::kBadProof;
  finish = peer_proof(secret_, PeerRole::kServer, t_);
  return PeerRefusal::kNone;
}

PeerClientHandshake::PeerClientHandshake(std::string secret, const PeerRunId& run, int rank, int server_rank)
    : secret_(std::move(secret)) {
  t_.run = run;
  t_.client_rank = static_cast<std::uint32_t>(rank);
  t_.server_rank = static_cast<std::uint32_t>(server_rank);
  t_.client_nonce = peer_nonce();
}

PeerRefusal PeerClientHandshake::answer(const ServerHello& hello, ClientHello& out) {
  if (get_be32(hello.data()) != kPeerHelloMagic) return PeerRefusal::kNotAPeer;
  said_rank_ = static_cast<int>(get_be32(hello.data() + 4));
  if (static_cast<std::uint32_t>(said_rank_) != t_.server_rank) return PeerRefusal::kWrongRank;
  if (!same(hello.data() + 8, t_.run.data(), t_.run.size())) return PeerRefusal::kOtherRun;
  std::memcpy(t_.server_nonce.data(), hello.data() + 8 + kPeerRunIdBytes, kPeerNonceBytes);
  const PeerProof proof = peer_proof(secret_, PeerRole::kClient, t_);
  put_be32(out.data(), t_.client_rank);
  std::memcpy(out.data() + 4, t_.client_nonce.data(), kPeerNonceBytes);
  std::memcpy(out.data() + 4 + kPeerNonceBytes, proof.data(), proof.size());
  return PeerRefusal::kNone;
}

PeerRefusal PeerClientHandshake::finish(const PeerProof& proof) const {
  const PeerProof want = peer_proof(secret_, PeerRole::kServer, t_);
  return same(want.data(), proof.data(), want.size()) ? PeerRefusal::kNone : PeerRefusal::kBadProof;
}

PeerFrameHeader peer_frame_header(std::uint32_t kind, std::uint64_t length) {
  PeerFrameHeader h{};
  put_be32(h.data(), kind);
  put_be64(h.data() + 4, length);
  return h;
}

std::vector<std::uint8_t> peer_request_frame(const std::vector<std::size_t>& ids, PeerFrameMac& mac) {
  const std::size_t length = 8 * ids.size();
  std::vector<std::uint8_t> frame(kPeerFrameHeaderBytes + length + kPeerTagBytes);
  const PeerFrameHeader header = peer_frame_header(kPeerMagic, length);
  std::memcpy(frame.data(), header.data(), header.size());
  for (std::size_t k = 0; k < ids.size(); ++k) put_be64(frame.data() + kPeerFrameHeaderBytes + 8 * k, ids[k]);
  const PeerTag tag = mac.tag(header.data(), frame.data() + kPeerFrameHeaderBytes, length);
  std::memcpy(frame.data() + kPeerFrameHeaderBytes + length, tag.data(), tag.size());
  return frame;
}

}  // namespace mlbench::pipeline
