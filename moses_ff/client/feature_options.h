// The ini keys of the ExternalReordering feature, parsed once for the moses and the moses2
// feature (moses_ff/moses/ and moses_ff/moses2/ExternalReordering.cpp).
//
// What it is for: the keys both features read from their feature line (server=, model=,
// version=, timeout-ms=, on-error=, type=, input-factor=, output-factor=,
// default-scores=, path=), with the same defaults and error texts for both; the line
// without our keys that each decoder's LexicalReordering gets; the client options they
// make; the check of a served model against type=; and the end-of-run summary lines.
// What it must not do: depend on Moses (an error comes back as text, which the feature
// prefixes with its name and throws), or talk gRPC (that is reordering_client.h).
//
// C++11-clean like reordering_client.h: the features include it with Moses's -std.
#ifndef MOSES_FF_CLIENT_FEATURE_OPTIONS_H_
#define MOSES_FF_CLIENT_FEATURE_OPTIONS_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

#include "ReorderingType.h"
#include "reordering_client.h"

namespace reordering {

struct FeatureOptions {
  enum OnError { FAIL, USE_DEFAULT };

  std::string server;
  std::string model;
  uint64_t version = 0;             // version=: 0 = newest at Load()
  int timeout_ms = 5000;
  OnError on_error = FAIL;
  std::string type;                 // type= as the ini spells it
  reordering_type::Schema schema;   // what it means (ReorderingType.h): what Load() checks
  size_t input_factor = 0;          // first factor of input-factor= (our model sees one)
  size_t output_factor = 0;         // first factor of output-factor=
  std::string default_scores;       // default-scores= as written; empty = not given
  std::string path;                 // path= (Moses2's table beside the model); empty = not given

  // Reads every key=value of a feature line (other keys are ignored; a later value of a
  // key wins). False, and *error says why (without the feature's name), for a refused
  // on-error=, a missing server= or model=, timeout-ms <= 0 or a type= Moses refuses.
  bool Parse(const std::vector<std::pair<std::string, std::string> > &args, std::string *error);
  // Parse() of every key=value of a whole feature line (its first token, the feature's
  // name, is no key), split as the decoders split it.
  bool ParseLine(const std::string &line, std::string *error);

  // How to reach server= (timeout-ms= per RPC, the other client defaults).
  ClientOptions Client() const;

  // Empty if the served model `info` gives the scores type= needs (the same kind,
  // orientation set, directions and conditioning; collapseff is not part of a model),
  // else why not (without the feature's name).
  std::string Mismatch(const ModelInfo &info) const;
};

// The decoder whose own LexicalReordering reads a feature's line.
enum Decoder { MOSES, MOSES2 };

// `line` without our keys, for `decoder`'s LexicalReordering, which throws on keys it does
// not know: server=, model=, version=, timeout-ms=, on-error=, and for Moses2 also
// default-scores= (Moses's LexicalReordering reads that one itself; Moses2's has none).
// Throws std::invalid_argument for a line with nothing in it.
std::string DecoderLine(const std::string &line, Decoder decoder);

// The end-of-run summary of a feature named `feature`, one line each (with its newline),
// or "" when there is nothing to say: how many Score RPCs (if any were sent) and how
// many sentences got default scores (if any did).
std::string RpcSummary(const std::string &feature, const RpcStats &stats);
std::string FailureSummary(const std::string &feature, const RpcStats &stats);

}  // namespace reordering

#endif  // MOSES_FF_CLIENT_FEATURE_OPTIONS_H_
