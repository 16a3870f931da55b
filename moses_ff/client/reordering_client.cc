// gRPC implementation of reordering_client.h (see there for what it is for).
//
// Retries are gRPC's own (a retryPolicy in the channel's service config: UNAVAILABLE
// only, exponential backoff, all within the call's deadline), load balancing is gRPC's
// round_robin, and reconnect backoff is capped so a restarted server is used again
// within about a second. Nothing here retries by hand.
#include "reordering_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "reordering/v1/reordering.grpc.pb.h"

namespace reordering {
namespace {

namespace pb = ::reordering::v1;

std::string Seconds(int ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fs", std::max(ms, 1) / 1000.0);
  return buf;
}

std::string ServiceConfig(const ClientOptions &o) {
  std::ostringstream s;
  s << R"({"loadBalancingConfig":[{"round_robin":{}}])";
  if (o.max_attempts > 1) {  // gRPC's retryPolicy needs 2..5 attempts; 1 means no retries
    s << R"(,"methodConfig":[{"name":[{"service":"reordering.v1.ReorderingScorer"}],)"
      << R"("retryPolicy":{"maxAttempts":)" << std::min(o.max_attempts, 5)
      << R"(,"initialBackoff":")" << Seconds(o.initial_backoff_ms)
      << R"(","maxBackoff":")" << Seconds(std::max(o.max_backoff_ms, o.initial_backoff_ms))
      << R"(","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}])";
  }
  s << "}";
  return s.str();
}

bool IsIpv4HostPort(const std::string &a) {
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || (c == ':' && i == colon))) return false;
  }
  return true;
}

template <class T>
void CopyArray(const std::vector<T> &from, google::protobuf::RepeatedField<T> *to) {
  to->Reserve(static_cast<int>(from.size()));
  to->Add(from.begin(), from.end());
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const ClientOptions &o) {
  if (o.tls_root_certs_file.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(o.tls_root_certs_file, std::ios::binary);
  std::ostringstream pem;
  pem << in.rdbuf();
  if (!in || pem.str().empty()) {
    throw ClientError(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT),
                      "reordering client: cannot read the TLS root certificates '" + o.tls_root_certs_file +
                          "' (a PEM file)");
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::SslCredentials(ssl);
}

}  // namespace

std::string ResolveTarget(const std::string &target) {
  if (target.empty()) throw ClientError(3, "reordering client: empty server address");
  if (target.find(',') == std::string::npos) return target;  // one address or URI
  if (target.compare(0, 5, "ipv4:") == 0 || target.compare(0, 5, "ipv6:") == 0 ||
      target.find("://") != std::string::npos) {
    return target;
  }
  // A bare comma-separated list: gRPC resolves it only with an ipv4:/ipv6: scheme,
  // which takes numeric addresses.
  bool v6 = target[0] == '[';
  std::stringstream list(target);
  std::string addr;
  while (std::getline(list, addr, ',')) {
    bool ok = v6 ? (!addr.empty() && addr[0] == '[' && addr.find("]:") != std::string::npos)
                 : IsIpv4HostPort(addr);
    if (!ok) {
      throw ClientError(3, "reordering client: server address list '" + target +
                               "': '" + addr + "' is not a numeric " + (v6 ? "[ipv6]:port" : "ipv4:port") +
                               " (for host names use one DNS name that resolves to every replica, "
                               "e.g. dns:///scorer:50051)");
    }
  }
  return (v6 ? "ipv6:" : "ipv4:") + target;
}

ScoreInput::ScoreInput() : token_offsets(1, 0), target_offsets(1, 0), align_offsets(1, 0) {}

uint32_t ScoreInputBuilder::Token(const std::string &token) {
  auto it = index_.find(token);
  if (it != index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(input_.token_offsets.size() - 1);
  input_.token_bytes += token;
  input_.token_offsets.push_back(static_cast<uint32_t>(input_.token_bytes.size()));
  index_.emplace(token, id);
  return id;
}

void ScoreInputBuilder::AddSourceToken(const std::string &token) { input_.source.push_back(Token(token)); }

void ScoreInputBuilder::AddPair(uint32_t start, uint32_t end, const std::vector<uint32_t> &target,
                                const std::vector<uint32_t> &align_src,
                                const std::vector<uint32_t> &align_tgt) {
  if (align_src.size() != align_tgt.size()) {
    throw std::invalid_argument("ScoreInputBuilder::AddPair: align_src and align_tgt differ in length");
  }
  StartPair(start, end);
  input_.target_tokens.insert(input_.target_tokens.end(), target.begin(), target.end());
  input_.target_offsets.back() = static_cast<uint32_t>(input_.target_tokens.size());
  input_.align_source.insert(input_.align_source.end(), align_src.begin(), align_src.end());
  input_.align_target.insert(input_.align_target.end(), align_tgt.begin(), align_tgt.end());
  input_.align_offsets.back() = static_cast<uint32_t>(input_.align_source.size());
}

void ScoreInputBuilder::StartPair(uint32_t start, uint32_t end) {
  input_.span_start.push_back(start);
  input_.span_end.push_back(end);
  input_.target_offsets.push_back(input_.target_offsets.back());
  input_.align_offsets.push_back(input_.align_offsets.back());
}

void ScoreInputBuilder::AddTargetToken(const std::string &token) {
  if (input_.span_start.empty()) throw std::logic_error("ScoreInputBuilder::AddTargetToken before StartPair");
  input_.target_tokens.push_back(Token(token));
  input_.target_offsets.back() = static_cast<uint32_t>(input_.target_tokens.size());
}

void ScoreInputBuilder::AddAlignmentPoint(uint32_t source, uint32_t target) {
  if (input_.span_start.empty()) throw std::logic_error("ScoreInputBuilder::AddAlignmentPoint before StartPair");
  input_.align_source.push_back(source);
  input_.align_target.push_back(target);
  input_.align_offsets.back() = static_cast<uint32_t>(input_.align_source.size());
}

ScoreInput ScoreInputBuilder::Release() {
  ScoreInput out;
  std::swap(out, input_);
  index_.clear();
  return out;
}

struct Client::Impl {
  ClientOptions options;
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::ReorderingScorer::Stub> stub;

  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options.timeout_ms));
    return ctx;
  }

  [[noreturn]] void Fail(const char *call, const std::string &model, const grpc::Status &st) const {
    std::ostringstream m;
    m << "reordering server " << options.target << ": " << call << "(model=" << model
      << ") failed with " << StatusName(st.error_code()) << " (deadline " << options.timeout_ms
      << " ms): " << st.error_message();
    throw ClientError(st.error_code(), m.str());
  }

  static const char *StatusName(grpc::StatusCode c) {
    switch (c) {
      case grpc::StatusCode::CANCELLED: return "CANCELLED";
      case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
      case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
      case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
      case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
      case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
      case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
      case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
      case grpc::StatusCode::INTERNAL: return "INTERNAL";
      case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
      default: return "error";
    }
  }
};

Client::Client(const ClientOptions &options) : impl_(new Impl) {
  impl_->options = options;
  impl_->target = ResolveTarget(options.target);
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(ServiceConfig(options));
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, options.keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(100, options.max_reconnect_backoff_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, std::min(100, options.max_reconnect_backoff_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, options.max_reconnect_backoff_ms);
  args.SetMaxReceiveMessageSize(64 << 20);
  impl_->channel = grpc::CreateCustomChannel(impl_->target, Credentials(options), args);
  impl_->stub = pb::ReorderingScorer::NewStub(impl_->channel);
}

Client::~Client() = default;

const ClientOptions &Client::options() const { return impl_->options; }
const std::string &Client::resolved_target() const { return impl_->target; }

ModelInfo Client::GetModel(const std::string &model, uint64_t version) const {
  pb::GetModelRequest req;
  req.set_model(model);
  req.set_version(version);
  pb::ModelInfo resp;
  auto ctx = impl_->Context();
  grpc::Status st = impl_->stub->GetModel(ctx.get(), req, &resp);
  if (!st.ok()) impl_->Fail("GetModel", model, st);
  ModelInfo info;
  info.name = resp.name();
  info.moses_type = resp.moses_type();
  info.classes.assign(resp.classes().begin(), resp.classes().end());
  info.directions.assign(resp.directions().begin(), resp.directions().end());
  info.outputs.assign(resp.outputs().begin(), resp.outputs().end());
  info.family = resp.family();
  info.version = resp.version();
  info.loaded_versions.assign(resp.loaded_versions().begin(), resp.loaded_versions().end());
  info.metadata_json = resp.metadata_json();
  info.context = resp.context();
  return info;
}

ScoreResult Client::Score(const std::string &model, uint64_t version, const ScoreInput &in) const {
  pb::ScoreRequest req;
  req.set_model(model);
  req.set_version(version);
  req.set_token_bytes(in.token_bytes);
  CopyArray(in.token_offsets, req.mutable_token_offsets());
  CopyArray(in.source, req.mutable_source());
  CopyArray(in.span_start, req.mutable_span_start());
  CopyArray(in.span_end, req.mutable_span_end());
  CopyArray(in.target_offsets, req.mutable_target_offsets());
  CopyArray(in.target_tokens, req.mutable_target_tokens());
  CopyArray(in.align_offsets, req.mutable_align_offsets());
  CopyArray(in.align_source, req.mutable_align_source());
  CopyArray(in.align_target, req.mutable_align_target());
  req.set_context_blocks(true);  // ExternalReordering combines a context model's blocks itself

  pb::ScoreResponse resp;
  auto ctx = impl_->Context();
  grpc::Status st = impl_->stub->Score(ctx.get(), req, &resp);
  if (!st.ok()) impl_->Fail("Score", model, st);

  ScoreResult out;
  out.model = resp.model();
  out.version = resp.version();
  out.outputs.assign(resp.outputs().begin(), resp.outputs().end());
  out.probabilities.assign(resp.probabilities().begin(), resp.probabilities().end());
  out.scores.assign(resp.scores().begin(), resp.scores().end());
  out.neighbour.assign(resp.neighbour().begin(), resp.neighbour().end());
  out.boundary.assign(resp.boundary().begin(), resp.boundary().end());
  const size_t cells = in.NumPairs() * out.outputs.size();
  const bool whole = out.context()
      ? out.probabilities.empty() && out.scores.size() == cells && out.neighbour.size() == cells &&
            out.boundary.size() == out.outputs.size()
      : out.probabilities.size() == cells && out.scores.empty() && out.neighbour.empty();
  if (out.outputs.empty() || !whole) {
    std::ostringstream m;
    m << "reordering server " << impl_->options.target << ": Score(model=" << model << ") answered ";
    if (out.context())
      m << "context blocks of " << out.scores.size() << " scores, " << out.neighbour.size() << " neighbour and "
        << out.boundary.size() << " boundary values";
    else
      m << out.probabilities.size() << " probabilities";
    m << " for " << in.NumPairs() << " pairs x " << out.outputs.size() << " outputs";
    throw ClientError(static_cast<int>(grpc::StatusCode::INTERNAL), m.str());
  }
  return out;
}

}  // namespace reordering
