// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// See ExternalReordering.h for what this is for and what it must not do.
#include "ExternalReordering.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include "moses/AlignmentInfo.h"
#include "moses/Hypothesis.h"
#include "moses/InputType.h"
#include "moses/Manager.h"
#include "moses/TargetPhrase.h"
#include "moses/TranslationOption.h"
#include "moses/TranslationOptionCollection.h"
#include "moses/TranslationOptionList.h"
#include "moses/Util.h"
#include "moses/Word.h"
#include "util/exception.hh"

#include "reordering_client.h"

using namespace std;

namespace Moses
{
namespace
{

const char *const kOurKeys[] = {"server", "model", "version", "timeout-ms", "on-error", NULL};

// First factor of a factor list such as input-factor=0 (our model sees one factor).
FactorType FirstFactor(const vector<pair<string, string> > &line, const string &key)
{
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i].first == key) return Tokenize<FactorType>(line[i].second, ",").at(0);
  return 0;
}

string Surface(const Word &w, FactorType f)
{
  const Factor *factor = w.GetFactor(f);
  return factor ? factor->GetString().as_string() : string();
}

}  // namespace

string ExternalReordering::StripServiceKeys(const string &line,
                                            vector<pair<string, string> > *found)
{
  const string kept = reordering_type::StripKeys(line, kOurKeys, found);
  UTIL_THROW_IF2(kept.empty(), "ExternalReordering: empty feature line");
  return kept;
}

ExternalReordering::ExternalReordering(const string &line)
  : LexicalReordering(StripServiceKeys(line, NULL))
  , m_requestedVersion(0)
  , m_pinnedVersion(0)
  , m_timeoutMs(5000)
  , m_onError(FAIL)
{
  vector<pair<string, string> > args;
  StripServiceKeys(line, &args);
  for (size_t i = 0; i < args.size(); ++i) {
    const string &key = args[i].first, &value = args[i].second;
    if (key == "server") m_server = value;
    else if (key == "model") m_model = value;
    else if (key == "version") m_requestedVersion = Scan<uint64_t>(value);
    else if (key == "timeout-ms") m_timeoutMs = Scan<int>(value);
    else if (key == "type") m_type = value;
    else if (key == "on-error") {
      UTIL_THROW_IF2(value != "fail" && value != "default",
                     GetScoreProducerDescription() << ": on-error=" << value
                     << " (expected fail or default)");
      m_onError = value == "fail" ? FAIL : USE_DEFAULT;
    }
  }
  UTIL_THROW_IF2(m_server.empty() || m_model.empty(),
                 GetScoreProducerDescription() << ": needs server=HOST:PORT and model=NAME");
  UTIL_THROW_IF2(m_timeoutMs <= 0, GetScoreProducerDescription() << ": timeout-ms must be > 0");
  string why;
  // LexicalReordering's constructor (LRModel) has already accepted type=, and the two
  // parsers accept the same strings (tests/client/test_type_spelling.py).
  UTIL_THROW_IF2(!reordering_type::Parse(m_type, &m_schema, &why), GetScoreProducerDescription() << ": " << why);
  m_inputFactor = FirstFactor(args, "input-factor");
  m_outputFactor = FirstFactor(args, "output-factor");
  // With no row, LRState adds default-scores if given, else nothing: a failed sentence
  // gets exactly that row, so it is not retried once per hypothesis. Rows are full
  // (classes x directions) even with collapseff, where Moses has fewer scores than
  // columns and reads default-scores past its end; we read zeros there instead.
  m_fallbackRow.assign(m_schema.NumOutputs(), 0.0f);
  if (GetHaveDefaultScores())
    for (size_t i = 0; i < m_fallbackRow.size() && i < GetNumScoreComponents(); ++i)
      m_fallbackRow[i] = GetDefaultScore(i);
}

ExternalReordering::~ExternalReordering()
{
  if (m_stats.calls > 0)
    VERBOSE(1, GetScoreProducerDescription() << ": " << m_stats.calls << " Score RPCs for " << m_stats.sentences
            << " sentences, at most " << m_stats.max_in_flight << " in flight at once, "
            << m_stats.micros / 1e6 << " s of RPC wall time in all" << endl);
  if (m_stats.failures > 0)
    cerr << GetScoreProducerDescription() << ": " << m_stats.failures << " of " << m_stats.sentences
         << " sentences were scored with default scores because the server failed" << endl;
}

void ExternalReordering::Load(AllOptions::ptr const& opts)
{
  LexicalReordering::Load(opts);  // no path=, so no table is read
  reordering::ClientOptions options;
  options.target = m_server;
  options.timeout_ms = m_timeoutMs;
  m_client.reset(new reordering::Client(options));
  reordering::ModelInfo info;
  try {
    info = m_client->GetModel(m_model, m_requestedVersion);
  } catch (const reordering::ClientError &e) {
    UTIL_THROW2(GetScoreProducerDescription() << ": cannot load model '" << m_model
                << "' from " << m_server << ": " << e.what());
  }
  // Compare schemas, not strings: Moses has many spellings of one type, the server
  // answers with the canonical one. collapseff is not part of the model: Moses collapses
  // the full rows we cache, as it collapses a table's.
  reordering_type::Schema served;
  string why;
  UTIL_THROW_IF2(!reordering_type::Parse(info.moses_type, &served, &why)
                 || !reordering_type::SameModel(m_schema, served)
                 || info.classes != m_schema.Classes() || info.directions != m_schema.Directions()
                 || info.outputs.size() != m_schema.NumOutputs(),
                 GetScoreProducerDescription() << ": served model '" << m_model << "' version "
                 << info.version << " is " << info.moses_type << " with " << info.outputs.size()
                 << " outputs, but this feature's type=" << m_type << " needs a "
                 << m_schema.Canonical(false) << " model with "
                 << m_schema.NumOutputs() << " outputs (kind, orientation set, directions and "
                 << "f/fe conditioning must match)");
  m_pinnedVersion = info.version;
  VERBOSE(1, GetScoreProducerDescription() << ": " << m_server << " model " << m_model
          << " version " << m_pinnedVersion << " (" << info.family << ", " << info.moses_type
          << ") pinned for this run" << endl);
}

FFState* ExternalReordering::EvaluateWhenApplied(const Hypothesis& hypo,
                                                 const FFState* prev_state,
                                                 ScoreComponentCollection* out) const
{
  if (!hypo.GetTranslationOption().GetLexReorderingScores(this))
    ScoreSentence(hypo.GetManager());
  return LexicalReordering::EvaluateWhenApplied(hypo, prev_state, out);
}

void ExternalReordering::ScoreSentence(Manager &manager) const
{
  const InputType &source = manager.GetSource();
  const TranslationOptionCollection *toc = manager.getSntTranslationOptions();
  const size_t n = source.GetSize();

  reordering::ScoreInputBuilder request;
  for (size_t i = 0; i < n; ++i) request.AddSourceToken(Surface(source.GetWord(i), m_inputFactor));

  vector<TranslationOption*> options;
  vector<uint32_t> target, alignSrc, alignTgt;
  for (size_t start = 0; start < n; ++start) {
    for (size_t end = start; end < n; ++end) {
      const TranslationOptionList *list = toc->GetTranslationOptionList(start, end);
      if (!list) break;
      for (TranslationOptionList::const_iterator it = list->begin(); it != list->end(); ++it) {
        TranslationOption *topt = *it;
        const TargetPhrase &tp = topt->GetTargetPhrase();
        target.clear();
        alignSrc.clear();
        alignTgt.clear();
        for (size_t k = 0; k < tp.GetSize(); ++k)
          target.push_back(request.Token(Surface(tp.GetWord(k), m_outputFactor)));
        const AlignmentInfo &align = tp.GetAlignTerm();
        for (AlignmentInfo::const_iterator a = align.begin(); a != align.end(); ++a) {
          alignSrc.push_back(a->first);
          alignTgt.push_back(a->second);
        }
        request.AddPair(start, end + 1, target, alignSrc, alignTgt);
        options.push_back(topt);
      }
    }
  }
  ++m_stats.sentences;
  if (options.empty()) return;

  reordering::ScoreResult result;
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  try {
    reordering::RpcScope counting(m_stats);
    result = m_client->Score(m_model, m_pinnedVersion, request.input());
  } catch (const reordering::ClientError &e) {
    if (m_onError == FAIL)
      UTIL_THROW2(GetScoreProducerDescription() << ": sentence " << source.GetTranslationId()
                  << ": " << e.what() << " (on-error=default would use default scores)");
    size_t failures = ++m_stats.failures;
    cerr << GetScoreProducerDescription() << ": sentence " << source.GetTranslationId()
         << " scored with default scores (" << failures << " so far): " << e.what() << endl;
    CacheFallbackRows(options);
    return;
  }
  UTIL_THROW_IF2(result.version != m_pinnedVersion || result.NumOutputs() != m_schema.NumOutputs(),
                 GetScoreProducerDescription() << ": server answered version " << result.version
                 << " with " << result.NumOutputs() << " outputs; pinned version " << m_pinnedVersion
                 << " has " << m_schema.NumOutputs());

  VERBOSE(1, "Line " << source.GetTranslationId() << ": " << GetScoreProducerDescription() << " scored "
          << options.size() << " translation options in one RPC, took "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
          << " seconds" << endl);
  const size_t width = result.NumOutputs();
  Scores row(width);
  for (size_t p = 0; p < options.size(); ++p) {
    for (size_t j = 0; j < width; ++j)
      row[j] = FloorScore(TransformScore(result.probabilities[p * width + j]));
    options[p]->CacheLexReorderingScores(*this, row);
  }
}

void ExternalReordering::CacheFallbackRows(const vector<TranslationOption*> &options) const
{
  for (size_t p = 0; p < options.size(); ++p)
    options[p]->CacheLexReorderingScores(*this, m_fallbackRow);
}

}
