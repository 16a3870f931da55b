// -*- mode: c++; indent-tabs-mode: nil; tab-width:2  -*-
// See ExternalReordering.h for what this is for and what it must not do.
#include "ExternalReordering.h"

#include <iostream>
#include <vector>

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

using namespace std;

namespace Moses
{
namespace
{

string Surface(const Word &w, FactorType f)
{
  const Factor *factor = w.GetFactor(f);
  return factor ? factor->GetString().as_string() : string();
}

// What Moses's tables make of a probability (the row cached on an option).
float MosesScore(float probability)
{
  return FloorScore(TransformScore(probability));
}

}  // namespace

ExternalReordering::ExternalReordering(const string &line)
  : LexicalReordering(reordering::DecoderLine(line, reordering::MOSES))
{
  string why;
  UTIL_THROW_IF2(!m_options.ParseLine(line, &why), GetScoreProducerDescription() << ": " << why);
  UTIL_THROW_IF2(!m_options.path.empty(), GetScoreProducerDescription()
                 << ": path= (the table beside the model in one feature) is Moses2's only; in moses "
                 "keep the table as its own LexicalReordering line");
  // With no row, LRState adds default-scores if given, else nothing: a failed sentence
  // gets exactly that row, so it is not retried once per hypothesis. Rows are full
  // (classes x directions) even with collapseff, where Moses has fewer scores than
  // columns and reads default-scores past its end; we read zeros there instead.
  vector<float> fallback(m_options.schema.NumOutputs(), 0.0f);
  if (GetHaveDefaultScores())
    for (size_t i = 0; i < fallback.size() && i < GetNumScoreComponents(); ++i)
      fallback[i] = GetDefaultScore(i);
  m_scorer.reset(new reordering::SentenceScorer(GetScoreProducerDescription(), m_options, MosesScore, fallback));
}

ExternalReordering::~ExternalReordering()
{
  VERBOSE(1, reordering::RpcSummary(GetScoreProducerDescription(), m_scorer->stats()));
  cerr << reordering::FailureSummary(GetScoreProducerDescription(), m_scorer->stats());
}

void ExternalReordering::Load(AllOptions::ptr const& opts)
{
  LexicalReordering::Load(opts);  // no path=, so no table is read
  string why, pinned;
  UTIL_THROW_IF2(!m_scorer->Load(&why, &pinned), why);
  VERBOSE(1, pinned << endl);
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

  reordering::ScoreInputBuilder pairs;
  for (size_t i = 0; i < n; ++i) pairs.AddSourceToken(Surface(source.GetWord(i), m_options.input_factor));
  vector<TranslationOption*> options;  // in the order of the pairs
  for (size_t start = 0; start < n; ++start) {
    for (size_t end = start; end < n; ++end) {
      const TranslationOptionList *list = toc->GetTranslationOptionList(start, end);
      if (!list) break;
      for (TranslationOptionList::const_iterator it = list->begin(); it != list->end(); ++it) {
        const TargetPhrase &tp = (*it)->GetTargetPhrase();
        pairs.StartPair(start, end + 1);
        for (size_t k = 0; k < tp.GetSize(); ++k)
          pairs.AddTargetToken(Surface(tp.GetWord(k), m_options.output_factor));
        const AlignmentInfo &align = tp.GetAlignTerm();
        for (AlignmentInfo::const_iterator a = align.begin(); a != align.end(); ++a)
          pairs.AddAlignmentPoint(a->first, a->second);
        options.push_back(*it);
      }
    }
  }

  reordering::ScoredSentence scored;
  string why;
  UTIL_THROW_IF2(!m_scorer->Score(pairs.input(), source.GetTranslationId(), &scored, &why), why);
  if (!scored.HasRows()) return;  // no options
  if (scored.Served())
    VERBOSE(1, "Line " << source.GetTranslationId() << ": " << GetScoreProducerDescription() << " scored "
            << options.size() << " translation options in one RPC, took " << scored.Seconds() << " seconds"
            << endl);
  Scores row(scored.Width());
  for (size_t p = 0; p < options.size(); ++p) {
    const float *values = scored.Row(p);
    row.assign(values, values + scored.Width());
    options[p]->CacheLexReorderingScores(*this, row);
  }
}

}
