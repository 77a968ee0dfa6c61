// The partitioned cache's wire protocol (docs/pipeline.md, "Partitioned cache"; docs/reliability.md,
// "Trust boundaries"), in one codec that the server (peer_server.h) and the client (peer_client.h)
// both use: the handshake's messages and proofs, the session keys, and the MAC'd frames. It does
// no I/O: each end reads and writes the bytes it is handed here. Integers are big-endian.
//
// NOTE [peer handshake]
// The handshake, after the TCP connect (the server speaks first):
//   1. server hello   u32 magic "MLP2" | u32 server rank | 32-byte run id | 16-byte nonce Ns
//   2. client hello   u32 client rank | 16-byte nonce Nc | 32-byte client proof
//   3. server finish  32-byte server proof
// Both proofs are HMAC-SHA256 under the run's shared secret over a label and the transcript
//   T = "mlbench-peer v2" | run id | u32 client rank | u32 server rank | Ns | Nc
// with the labels "client proof" and "server proof": a proof is bound to both nonces (fresh on
// each connection: no replay), to its direction (a server's proof is no client's: no reflection),
// to both ranks (the client's claim and the rank the client dialed: a relay between other
// ranks' connections fails) and to the run (run id = SHA-256 of the run's name, which nodes of
// one run share: a node of another run fails even under the same secret). The server refuses a
// client that claims its own rank or a rank outside the run, and checks the client's proof
// before it proves anything; the client checks the server's rank and run before it proves, and
// the server's proof before it sends a request.
//
// NOTE [peer frames]
// After the handshake each direction has a key of its own, HMAC-SHA256(secret, label | T) with
// the labels "client key" and "server key" (an HMAC-based KDF over both nonces: fresh per
// connection). Every message is a frame
//   u32 kind | u64 length | `length` bytes | 16-byte tag
// tag = GMAC (AES-256-GCM with no plaintext, the frame's kind, length and bytes as its
// additional data) under the key of the sender's direction, with the nonce u32 0 | u64 sequence.
// The sequence number counts that direction's frames from 0 and is not sent: a frame replayed,
// dropped, reordered or moved to another connection fails its tag as surely as a changed byte
// does. A nonce is never used twice under a key (one key per connection and direction, a 64-bit
// count), as GMAC needs. GMAC, not HMAC-SHA256: on the 2-CPU VM of docs/performance.md a 23 KB
// item cost 5.7 us against 27.7 us, and a partitioned node spends its CPU decoding. A request's kind is "MLPC" and its
// bytes are 1 to kPeerMaxIds u64 item ids; a reply is one frame per id, in the request's order, its kind the PeerStatus
// and its bytes the item's (none but for kCacheHit and kStorage). Items are authenticated, not encrypted: anyone on the
// path can read them (docs/reliability.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace mlbench::pipeline {

enum class PeerStatus : std::uint32_t {
  kCacheHit = 0,  // from the owner's cache
  kStorage = 1,   // the owner read it from its storage (and cached it)
  kMiss = 2,      // the owner could not read it either: fetch it yourself
  kRejected = 3,  // not an item of the owner's partition
};

inline constexpr std::uint32_t kPeerHelloMagic = 0x4d4c5032;  // "MLP2": protocol version 2
inline constexpr std::uint32_t kPeerMagic = 0x4d4c5043;       // "MLPC": a request frame's kind
inline constexpr std::uint32_t kPeerMaxIds = 256;             // ids in one request, at most
inline constexpr std::size_t kPeerNonceBytes = 16;
inline constexpr std::size_t kPeerRunIdBytes = 32;
inline constexpr std::size_t kPeerProofBytes = 32;
inline constexpr std::size_t kPeerTagBytes = 16;
inline constexpr std::size_t kPeerFrameHeaderBytes = 12;  // kind + length
inline constexpr std::size_t kServerHelloBytes = 4 + 4 + kPeerRunIdBytes + kPeerNonceBytes;
inline constexpr std::size_t kClientHelloBytes = 4 + kPeerNonceBytes + kPeerProofBytes;

using PeerNonce = std::array<std::uint8_t, kPeerNonceBytes>;
using PeerRunId = std::array<std::uint8_t, kPeerRunIdBytes>;
using PeerProof = std::array<std::uint8_t, kPeerProofBytes>;
using PeerTag = std::array<std::uint8_t, kPeerTagBytes>;
using PeerFrameHeader = std::array<std::uint8_t, kPeerFrameHeaderBytes>;
using ServerHello = std::array<std::uint8_t, kServerHelloBytes>;
using ClientHello = std::array<std::uint8_t, kClientHelloBytes>;

void put_be32(std::uint8_t* p, std::uint32_t v);
void put_be64(std::uint8_t* p, std::uint64_t v);
std::uint32_t get_be32(const std::uint8_t* p);
std::uint64_t get_be64(const std::uint8_t* p);

// SHA-256 of the run's name (PartitionConfig::run).
PeerRunId peer_run_id(const std::string& run);
// 16 random bytes (OpenSSL's RAND_bytes); throws std::runtime_error when it fails.
PeerNonce peer_nonce();

enum class PeerRole { kClient, kServer };

// What both proofs and both keys are bound to (NOTE [peer handshake]).
struct PeerTranscript {
  PeerRunId run{};
  std::uint32_t client_rank = 0, server_rank = 0;
  PeerNonce server_nonce{}, client_nonce{};
};
// `who`'s proof over `t` under `secret`.
PeerProof peer_proof(const std::string& secret, PeerRole who, const PeerTranscript& t);

// One direction's MAC of frames (NOTE [peer frames]): its key and its next sequence number. Each
// tag() or check() is one frame: the sequence number advances whether or not the frame checked.
class PeerFrameMac {
 public:
  PeerFrameMac();  // a key of zeros: no peer's (tests)
  PeerFrameMac(const std::string& secret, PeerRole sender, const PeerTranscript& t);
  PeerTag tag(const std::uint8_t* header, const std::uint8_t* bytes, std::size_t size);
  // In constant time.
  bool check(const std::uint8_t* header, const std::uint8_t* bytes, std::size_t size, const std::uint8_t* tag);
  std::uint64_t frames() const { return sequence_; }

 private:
  struct CipherFree {
    void operator()(evp_cipher_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_cipher_ctx_st, CipherFree> gmac_;  // AES-256-GCM under the direction's key
  std::uint64_t sequence_ = 0;
};

// An end's two directions once the handshake is done.
struct PeerSession {
  PeerFrameMac send, receive;
  PeerSession() = default;
  PeerSession(const std::string& secret, PeerRole me, const PeerTranscript& t);
};

// Why a handshake was refused.
enum class PeerRefusal {
  kNone,
  kNotAPeer,   // client: no "MLP2" greeting
  kWrongRank,  // client: the server says it is another rank than the one dialed
  kOtherRun,   // client: the server's run id is not this node's
  kOwnRank,    // server: the client claims the server's own rank, or one outside the run
  kBadProof,   // either end: the other's proof does not check
};

// The server's half of the handshake.
class PeerServerHandshake {
 public:
  PeerServerHandshake(std::string secret, const PeerRunId& run, int rank, int world);
  const ServerHello& hello() const { return hello_; }
  // The client's hello: kNone and the server's proof to send in `finish`, or why it is refused.
  PeerRefusal accept(const ClientHello& client, PeerProof& finish);
  int client_rank() const { return static_cast<int>(t_.client_rank); }
  // After accept() returned kNone.
  PeerSession session() const { return PeerSession(secret_, PeerRole::kServer, t_); }

 private:
  std::string secret_;
  int world_ = 0;
  PeerTranscript t_;
  ServerHello hello_{};
};

// The client's half of the handshake.
class PeerClientHandshake {
 public:
  PeerClientHandshake(std::string secret, const PeerRunId& run, int rank, int server_rank);
  // The server's hello: kNone and the client's hello to send in `out`, or why not (nothing is
  // proved to a server that is not the rank dialed, of this run).
  PeerRefusal answer(const ServerHello& hello, ClientHello& out);
  // The server's proof: kNone, or kBadProof.
  PeerRefusal finish(const PeerProof& proof) const;
  // What the server said it is (after answer()).
  int server_rank_said() const { return said_rank_; }
  PeerSession session() const { return PeerSession(secret_, PeerRole::kClient, t_); }

 private:
  std::string secret_;
  PeerTranscript t_;
  int said_rank_ = -1;
};

// A frame's header.
PeerFrameHeader peer_frame_header(std::uint32_t kind, std::uint64_t length);
// A request's length that the server accepts: 1 to kPeerMaxIds whole ids.
inline bool peer_request_length_ok(std::uint64_t length) {
  return length >= 8 && length <= 8ull * kPeerMaxIds && length % 8 == 0;
}
// A whole request frame for `ids` (1 to kPeerMaxIds of them), tagged with `mac`.
std::vector<std::uint8_t> peer_request_frame(const std::vector<std::size_t>& ids, PeerFrameMac& mac);

}  // namespace mlbench::pipeline
