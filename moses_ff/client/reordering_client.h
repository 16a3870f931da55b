// C++ client for the reordering.v1 scoring service (proto/reordering/v1/reordering.proto).
//
// What it is for: the one place where C++ talks gRPC to the scoring service. The Moses
// feature functions use it through sentence_scorer.h.
// What it must not do: know anything about Moses, features or orientation semantics;
// it moves the arrays of one ScoreRequest and returns the answer's arrays unchanged
// (probabilities, or a context model's blocks, which sentence_scorer.h combines).
//
// This header is deliberately C++11-clean and free of gRPC/protobuf includes (pimpl):
// Moses compiles its sources with -std=c++0x, while gRPC's headers need C++14 or later.
// The implementation (reordering_client.cc) is C++17.
#ifndef MOSES_FF_CLIENT_REORDERING_CLIENT_H_
#define MOSES_FF_CLIENT_REORDERING_CLIENT_H_

#include <stdint.h>

#include <atomic>
#include <chrono>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace reordering {

// One decoder run's Score RPCs, for a feature's end-of-run summary: `moses -threads N`
// sends N sentences' RPCs at once, so every count is atomic. Kept here, beside the
// client, so that the moses and the moses2 features count alike.
struct RpcStats {
  std::atomic<size_t> sentences{0}, failures{0};
  std::atomic<size_t> in_flight{0}, max_in_flight{0}, calls{0};
  std::atomic<long long> micros{0};  // wall time of all RPCs
};

// Counts one Score RPC while it runs (the scope of the call).
class RpcScope {
 public:
  explicit RpcScope(RpcStats &stats) : stats_(stats), start_(std::chrono::steady_clock::now()) {
    ++stats_.calls;
    size_t running = ++stats_.in_flight, seen = stats_.max_in_flight.load();
    while (running > seen && !stats_.max_in_flight.compare_exchange_weak(seen, running)) {}
  }
  ~RpcScope() {
    stats_.micros += std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - start_).count();
    --stats_.in_flight;
  }
  RpcScope(const RpcScope &) = delete;
  RpcScope &operator=(const RpcScope &) = delete;

 private:
  RpcStats &stats_;
  std::chrono::steady_clock::time_point start_;
};

// How to reach the service and how hard to try.
struct ClientOptions {
  // One address "host:port", several "10.0.0.1:50051,10.0.0.2:50051" (balanced
  // round_robin), or any gRPC target URI ("ipv4:a:1,b:2", "dns:///scorer:50051").
  std::string target;
  // Deadline of one RPC, retries included.
  int timeout_ms = 5000;
  // Attempts per RPC when the service answers UNAVAILABLE (gRPC caps this at 5; 1 = no retry).
  int max_attempts = 4;
  int initial_backoff_ms = 50;
  int max_backoff_ms = 1000;
  // How soon a dropped connection is retried; small so a restarted server is found fast.
  int max_reconnect_backoff_ms = 1000;
  // HTTP/2 keepalive ping interval while calls are active. gRPC servers refuse pings
  // more often than every 5 minutes unless configured otherwise, hence the default.
  int keepalive_ms = 300000;
  // TLS: a PEM file of root certificates to verify the server with (its CA, or a
  // self-signed server certificate itself); empty = plaintext. The server is started with
  // --tls-cert/--tls-key, and its certificate must name the host of `target`.
  std::string tls_root_certs_file;
};

// What GetModel reports: the schema a client must check before using a model.
struct ModelInfo {
  std::string name;
  std::string moses_type;  // e.g. hier-msd-bidirectional-fe
  std::vector<std::string> classes;
  std::vector<std::string> directions;
  std::vector<std::string> outputs;  // Moses column order, backward block first
  std::string family;
  uint64_t version = 0;  // the version this answer describes
  std::vector<uint64_t> loaded_versions;
  std::string metadata_json;
  // The model conditions on the phrase the decoder places next to each pair (issue 48):
  // its Score answers are context blocks (ScoreResult::context()), not probabilities.
  bool context = false;
};

// One sentence and all its phrase pairs, laid out exactly like ScoreRequest:
// a token table (bytes + offsets), the source as token indices, and parallel arrays
// per pair (see the proto for each field's meaning).
struct ScoreInput {
  std::string token_bytes;
  std::vector<uint32_t> token_offsets;  // n_tokens + 1, starts at 0
  std::vector<uint32_t> source;
  std::vector<uint32_t> span_start;      // inclusive
  std::vector<uint32_t> span_end;        // exclusive
  std::vector<uint32_t> target_offsets;  // n_pairs + 1
  std::vector<uint32_t> target_tokens;
  std::vector<uint32_t> align_offsets;   // n_pairs + 1
  std::vector<uint32_t> align_source;
  std::vector<uint32_t> align_target;

  ScoreInput();  // an empty sentence: offsets arrays hold their leading 0
  size_t NumPairs() const { return span_start.size(); }
};

// Fills a ScoreInput one token and one pair at a time, interning tokens so each
// distinct string is sent once.
class ScoreInputBuilder {
 public:
  // Index of `token` in the token table (added on first sight).
  uint32_t Token(const std::string &token);
  void AddSourceToken(const std::string &token);
  // A pair covering source[start, end) whose target phrase is `target` (token indices
  // from Token()) and whose phrase-relative alignment is (src[i], tgt[i]).
  void AddPair(uint32_t start, uint32_t end, const std::vector<uint32_t> &target,
               const std::vector<uint32_t> &align_src, const std::vector<uint32_t> &align_tgt);
  // The same pair a word at a time, as a decoder walks its options: StartPair, then the
  // pair's target tokens and its alignment points (phrase-relative), which go to the
  // pair started last. input() is a whole request after every call.
  void StartPair(uint32_t start, uint32_t end);
  void AddTargetToken(const std::string &token);
  void AddAlignmentPoint(uint32_t source, uint32_t target);
  const ScoreInput &input() const { return input_; }
  ScoreInput Release();

 private:
  ScoreInput input_;
  std::map<std::string, uint32_t> index_;
};

// One Score answer, in Moses column order: a model without context answers probabilities
// [NumPairs() x outputs.size()], row-major; a model with decoder context answers its
// context blocks instead (the proto's ScoreResponse says how they combine): its own scores
// and its neighbour block [NumPairs() x outputs.size()] each, and the boundary
// [outputs.size()], with no probabilities.
struct ScoreResult {
  std::string model;
  uint64_t version = 0;
  std::vector<std::string> outputs;
  std::vector<float> probabilities;
  std::vector<float> scores, neighbour, boundary;
  size_t NumOutputs() const { return outputs.size(); }
  bool context() const { return !boundary.empty(); }
};

// Any failed call. `code` is the gRPC status code (14 = UNAVAILABLE, 4 =
// DEADLINE_EXCEEDED, 5 = NOT_FOUND, 9 = FAILED_PRECONDITION, ...); what() names the
// call, the target and the server's message.
class ClientError : public std::runtime_error {
 public:
  ClientError(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// A connection (one gRPC channel) to the service. Thread-safe: every method is const
// and may be called from many decoding threads at once.
class Client {
 public:
  explicit Client(const ClientOptions &options);
  ~Client();
  Client(const Client &) = delete;
  Client &operator=(const Client &) = delete;

  // `version` 0 = the newest loaded version.
  ModelInfo GetModel(const std::string &model, uint64_t version = 0) const;
  // Asks with context_blocks set (a model without context answers probabilities all the
  // same). Throws ClientError on any failure, including a malformed answer (wrong row count,
  // or blocks of the wrong length).
  ScoreResult Score(const std::string &model, uint64_t version, const ScoreInput &input) const;

  const ClientOptions &options() const;
  // The gRPC target actually dialled (after turning "a:1,b:2" into an ipv4:/ipv6: URI).
  const std::string &resolved_target() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "a:1,b:2" -> "ipv4:a:1,b:2" (or ipv6: for bracketed addresses); a single address or a
// target that already names a scheme is returned unchanged. Exposed for tests.
std::string ResolveTarget(const std::string &target);

}  // namespace reordering

#endif  // MOSES_FF_CLIENT_REORDERING_CLIENT_H_
