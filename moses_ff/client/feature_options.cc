// See feature_options.h for what this is for.
#include "feature_options.h"

#include <sstream>
#include <stdexcept>

namespace reordering {
namespace {

// Moses's Scan<T>: what `>>` reads from the front of `value` (0 if nothing).
template <typename T>
T Scan(const std::string &value) {
  std::istringstream in(value);
  T out = T();
  in >> out;
  return out;
}

// Moses's Tokenize<FactorType>(value, ",").at(0): the first non-empty comma-separated
// part (throws std::out_of_range, as .at(0) did, when there is none).
size_t FirstFactor(const std::string &value) {
  std::vector<size_t> factors;
  const size_t start = value.find_first_not_of(',');
  if (start != std::string::npos)
    factors.push_back(Scan<size_t>(value.substr(start, value.find(',', start) - start)));
  return factors.at(0);
}

}  // namespace

bool FeatureOptions::Parse(const std::vector<std::pair<std::string, std::string> > &args,
                           std::string *error) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &key = args[i].first, &value = args[i].second;
    if (key == "server") server = value;
    else if (key == "model") model = value;
    else if (key == "version") version = Scan<uint64_t>(value);
    else if (key == "timeout-ms") timeout_ms = Scan<int>(value);
    else if (key == "type") type = value;
    else if (key == "default-scores") default_scores = value;
    else if (key == "path") path = value;
    else if (key == "input-factor") input_factor = FirstFactor(value);
    else if (key == "output-factor") output_factor = FirstFactor(value);
    else if (key == "on-error") {
      if (value != "fail" && value != "default") {
        *error = "on-error=" + value + " (expected fail or default)";
        return false;
      }
      on_error = value == "fail" ? FAIL : USE_DEFAULT;
    }
  }
  if (server.empty() || model.empty()) {
    *error = "needs server=HOST:PORT and model=NAME";
    return false;
  }
  if (timeout_ms <= 0) {
    *error = "timeout-ms must be > 0";
    return false;
  }
  // The decoder's LexicalReordering has already accepted type=, and the two parsers
  // accept the same strings (tests/client/test_type_spelling.py).
  return reordering_type::Parse(type, &schema, error);
}

bool FeatureOptions::ParseLine(const std::string &line, std::string *error) {
  static const char *const kNone[] = {NULL};
  std::vector<std::pair<std::string, std::string> > args;
  reordering_type::StripKeys(line, kNone, &args);
  return Parse(args, error);
}

std::string DecoderLine(const std::string &line, Decoder decoder) {
  static const char *const kMoses[] = {"server", "model", "version", "timeout-ms", "on-error", NULL};
  static const char *const kMoses2[] = {"server", "model", "version", "timeout-ms", "on-error", "default-scores",
                                        NULL};
  const std::string kept = reordering_type::StripKeys(line, decoder == MOSES ? kMoses : kMoses2, NULL);
  if (kept.empty()) throw std::invalid_argument("ExternalReordering: empty feature line");
  return kept;
}

ClientOptions FeatureOptions::Client() const {
  ClientOptions options;
  options.target = server;
  options.timeout_ms = timeout_ms;
  return options;
}

std::string FeatureOptions::Mismatch(const ModelInfo &info) const {
  // Compare schemas, not strings: Moses has many spellings of one type, the server
  // answers with the canonical one. collapseff is not part of the model: the decoder
  // collapses the full rows we give it, as it collapses a table's.
  reordering_type::Schema served;
  if (reordering_type::Parse(info.moses_type, &served, NULL) && reordering_type::SameModel(schema, served) &&
      info.classes == schema.Classes() && info.directions == schema.Directions() &&
      info.outputs.size() == schema.NumOutputs())
    return std::string();
  std::ostringstream why;
  why << "served model '" << model << "' version " << info.version << " is " << info.moses_type
      << " with " << info.outputs.size() << " outputs, but this feature's type=" << type << " needs a "
      << schema.Canonical(false) << " model with " << schema.NumOutputs()
      << " outputs (kind, orientation set, directions and f/fe conditioning must match)";
  return why.str();
}

std::string RpcSummary(const std::string &feature, const RpcStats &stats) {
  if (stats.calls == 0) return std::string();
  std::ostringstream out;
  out << feature << ": " << stats.calls << " Score RPCs for " << stats.sentences << " sentences, at most "
      << stats.max_in_flight << " in flight at once, " << stats.micros / 1e6 << " s of RPC wall time in all\n";
  return out.str();
}

std::string FailureSummary(const std::string &feature, const RpcStats &stats) {
  if (stats.failures == 0) return std::string();
  std::ostringstream out;
  out << feature << ": " << stats.failures << " of " << stats.sentences
      << " sentences were scored with default scores because the server failed\n";
  return out.str();
}

}  // namespace reordering
