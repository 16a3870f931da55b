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
  , m_pinnedVersion(0)
{
  vector<pair<string, string> > args;
  StripServiceKeys(line, &args);
  string why;
  UTIL_THROW_IF2(!m_options.Parse(args, &why), GetScoreProducerDescription() << ": " << why);
  for (size_t i = 0; i < args.size(); ++i)
    UTIL_THROW_IF2(args[i].first == "path", GetScoreProducerDescription()
                   << ": path= (the table beside the model in one feature) is Moses2's only; in moses "
                   "keep the table as its own LexicalReordering line");
  // With no row, LRState adds default-scores if given, else nothing: a failed sentence
  // gets exactly that row, so it is not retried once per hypothesis. Rows are full
  // (classes x directions) even with collapseff, where Moses has fewer scores than
  // columns and reads default-scores past its end; we read zeros there instead.
  m_fallbackRow.assign(m_options.schema.NumOutputs(), 0.0f);
  if (GetHaveDefaultScores())
    for (size_t i = 0; i < m_fallbackRow.size() && i < GetNumScoreComponents(); ++i)
      m_fallbackRow[i] = GetDefaultScore(i);
}

ExternalReordering::~ExternalReordering()
{
  VERBOSE(1, reordering::RpcSummary(GetScoreProducerDescription(), m_stats));
  cerr << reordering::FailureSummary(GetScoreProducerDescription(), m_stats);
}

void ExternalReordering::Load(AllOptions::ptr const& opts)
{
  LexicalReordering::Load(opts);  // no path=, so no table is read
  m_client.reset(new reordering::Client(m_options.Client()));
  reordering::ModelInfo info;
  try {
    info = m_client->GetModel(m_options.model, m_options.version);
  } catch (const reordering::ClientError &e) {
    UTIL_THROW2(GetScoreProducerDescription() << ": cannot load model '" << m_options.model
                << "' from " << m_options.server << ": " << e.what());
  }
  const string why = m_options.Mismatch(info);
  UTIL_THROW_IF2(!why.empty(), GetScoreProducerDescription() << ": " << why);
  m_pinnedVersion = info.version;
  VERBOSE(1, GetScoreProducerDescription() << ": " << m_options.server << " model " << m_options.model
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
  for (size_t i = 0; i < n; ++i) request.AddSourceToken(Surface(source.GetWord(i), m_options.input_factor));

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
          target.push_back(request.Token(Surface(tp.GetWord(k), m_options.output_factor)));
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
    result = m_client->Score(m_options.model, m_pinnedVersion, request.input());
  } catch (const reordering::ClientError &e) {
    if (m_options.on_error == reordering::FeatureOptions::FAIL)
      UTIL_THROW2(GetScoreProducerDescription() << ": sentence " << source.GetTranslationId()
                  << ": " << e.what() << " (on-error=default would use default scores)");
    size_t failures = ++m_stats.failures;
    cerr << GetScoreProducerDescription() << ": sentence " << source.GetTranslationId()
         << " scored with default scores (" << failures << " so far): " << e.what() << endl;
    CacheFallbackRows(options);
    return;
  }
  UTIL_THROW_IF2(result.version != m_pinnedVersion || result.NumOutputs() != m_options.schema.NumOutputs(),
                 GetScoreProducerDescription() << ": server answered version " << result.version
                 << " with " << result.NumOutputs() << " outputs; pinned version " << m_pinnedVersion
                 << " has " << m_options.schema.NumOutputs());

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
