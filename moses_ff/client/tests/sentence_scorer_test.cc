// SentenceScorer (sentence_scorer.h): what both decoders' features get for a sentence,
// against the real server of the fixture (fixture.h): the rows of the pinned version, the
// schema check of Load, what a failed RPC gives under each on-error=, and a context model's
// blocks, which ContextScore combines into what the model itself gives a pair next to a
// neighbour; and, with no server, ContextScore's arithmetic, the ContextCache that keeps
// its results bit for bit, and CompareScores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixture.h"
#include "sentence_scorer.h"
#include "server_process.h"

namespace reordering {
namespace {

using testing_support::FreeLoopbackPort;
using testing_support::g_fixture;
using testing_support::g_server;
using testing_support::Options;

// The decoders' FloorScore(TransformScore(p)), as the features pass it in.
float LnFloor(float p) { return std::max(std::log(p), -100.0f); }

FeatureOptions Line(const std::string &keys) {
  FeatureOptions o;
  std::string why;
  if (!o.ParseLine("ExternalReordering name=ER0 " + keys, &why)) throw std::invalid_argument(why);
  return o;
}

// The feature line of the fixture's model on the fixture's server.
std::string Served(const std::string &more = "") {
  return "type=" + g_fixture->keys.at("moses_type") + " server=" + g_server->address() + " model=" +
         g_fixture->model() + " " + more;
}

bool StartsWith(const std::string &s, const std::string &prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool EndsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What is written on std::cerr while it lives.
class StderrCapture {
 public:
  StderrCapture() : old_(std::cerr.rdbuf(text_.rdbuf())) {}
  ~StderrCapture() { std::cerr.rdbuf(old_); }
  std::string str() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::streambuf *old_;
};

TEST(SentenceScorer, RowsAreTheDecodersScoresOfThePinnedVersion) {
  REQUIRE_FIXTURE();
  Client client(Options(g_server->address()));
  const size_t width = std::stoul(g_fixture->keys.at("n_outputs"));
  for (uint64_t version : {uint64_t(0), g_fixture->oldest()}) {
    SentenceScorer scorer("ER0", Line(Served("version=" + std::to_string(version))), LnFloor, {});
    std::string why, pinned;
    ASSERT_TRUE(scorer.Load(&why, &pinned)) << why;
    const uint64_t want = version ? version : g_fixture->newest();
    EXPECT_EQ(want, scorer.pinned_version());
    EXPECT_FALSE(scorer.context());
    const ModelInfo info = client.GetModel(g_fixture->model(), want);
    EXPECT_EQ("ER0: " + g_server->address() + " model " + g_fixture->model() + " version " + std::to_string(want) +
                  " (" + info.family + ", " + info.moses_type + ") pinned for this run",
              pinned);
    for (size_t r = 0; r < g_fixture->requests.size(); ++r) {
      const ScoreInput &pairs = g_fixture->requests[r];
      ScoredSentence scored;
      ASSERT_TRUE(scorer.Score(pairs, static_cast<long>(r), &scored, &why)) << why;
      ASSERT_TRUE(scored.Served());
      ASSERT_TRUE(scored.HasRows());
      ASSERT_FALSE(scored.Context());  // asked for blocks, a model without context answers probabilities
      ASSERT_EQ(nullptr, scored.Boundary());
      ASSERT_EQ(pairs.NumPairs(), scored.NumPairs());
      ASSERT_EQ(width, scored.Width());
      ASSERT_EQ(width, scored.Outputs());
      const std::vector<float> probs = client.Score(g_fixture->model(), want, pairs).probabilities;
      const std::vector<float> &python = g_fixture->expected.at(want)[r];
      for (size_t p = 0; p < pairs.NumPairs(); ++p) {
        for (size_t j = 0; j < width; ++j) {
          ASSERT_EQ(LnFloor(probs[p * width + j]), scored.Row(p)[j]) << "request " << r << " pair " << p;
          ASSERT_NEAR(python[p * width + j], std::exp(scored.Row(p)[j]), 1e-6) << "request " << r << " pair " << p;
        }
      }
    }
    EXPECT_EQ(g_fixture->requests.size(), scorer.stats().calls.load());
    EXPECT_EQ(g_fixture->requests.size(), scorer.stats().sentences.load());
    EXPECT_EQ(0u, scorer.stats().failures.load());
  }
}

TEST(SentenceScorer, LoadRefusesAModelOfAnotherSchema) {
  REQUIRE_FIXTURE();
  SentenceScorer scorer("ER0", Line("type=phrase-msd-bidirectional-fe server=" + g_server->address() + " model=" +
                                    g_fixture->model()), LnFloor, {});
  std::string why, pinned;
  ASSERT_FALSE(scorer.Load(&why, &pinned));
  EXPECT_TRUE(StartsWith(why, "ER0: served model '" + g_fixture->model() + "' version ")) << why;
  EXPECT_NE(why.find("is " + g_fixture->keys.at("moses_type")), std::string::npos) << why;
  EXPECT_NE(why.find("needs a phrase-msd-bidirectional-fe model"), std::string::npos) << why;
  EXPECT_EQ("", pinned);
  ScoredSentence scored;
  EXPECT_FALSE(scorer.Score(g_fixture->requests.front(), 0, &scored, &why));  // nothing pinned
  EXPECT_EQ("ER0: scored before Load()", why);
}

TEST(SentenceScorer, LoadNamesAServerThatIsNotThere) {
  const std::string target = "127.0.0.1:" + std::to_string(FreeLoopbackPort());  // nothing listens there
  SentenceScorer scorer("ER0", Line("type=msd-bidirectional-fe server=" + target + " model=ja-en timeout-ms=1000"),
                        LnFloor, {});
  std::string why, pinned;
  ASSERT_FALSE(scorer.Load(&why, &pinned));
  EXPECT_TRUE(StartsWith(why, "ER0: cannot load model 'ja-en' from " + target + ": reordering server " + target))
      << why;
}

TEST(SentenceScorer, ASentenceWithoutPairsSendsNoRpc) {
  // Not loaded, and no server: nothing is asked for a sentence with no options.
  SentenceScorer scorer("ER0", Line("type=msd-bidirectional-fe server=127.0.0.1:1 model=ja-en"), LnFloor,
                        std::vector<float>(6, -1.0f));
  ScoreInputBuilder pairs;
  pairs.AddSourceToken("kita");
  ScoredSentence scored;
  std::string why;
  ASSERT_TRUE(scorer.Score(pairs.input(), 3, &scored, &why)) << why;
  EXPECT_FALSE(scored.HasRows());
  EXPECT_FALSE(scored.Served());
  EXPECT_EQ(0u, scored.NumPairs());
  EXPECT_EQ(nullptr, scored.Row(0));
  EXPECT_EQ(1u, scorer.stats().sentences.load());
  EXPECT_EQ(0u, scorer.stats().calls.load());
}

TEST(SentenceScorer, AFailedRpcStopsTheDecoderOrGivesTheFallbackRow) {
  REQUIRE_FIXTURE();
  // A request the server refuses (INVALID_ARGUMENT): a span past the end of the sentence.
  ScoreInput refused = g_fixture->requests.front();
  refused.span_end[0] = static_cast<uint32_t>(refused.source.size() + 5);
  EXPECT_THROW(Client(Options(g_server->address())).Score(g_fixture->model(), 0, refused), ClientError);
  std::string why, pinned;

  SentenceScorer fail("ER0", Line(Served("on-error=fail")), LnFloor, std::vector<float>(6, -1.0f));
  ASSERT_TRUE(fail.Load(&why, &pinned)) << why;
  ScoredSentence scored;
  EXPECT_FALSE(fail.Score(refused, 7, &scored, &why));
  EXPECT_TRUE(StartsWith(why, "ER0: sentence 7: reordering server " + g_server->address())) << why;
  EXPECT_TRUE(EndsWith(why, " (on-error=default would use default scores)")) << why;
  EXPECT_EQ(0u, fail.stats().failures.load());

  const std::vector<float> fallback = {-1, -2, -3, -4, -5, -6};
  SentenceScorer fallBack("ER0", Line(Served("on-error=default")), LnFloor, fallback);
  ASSERT_TRUE(fallBack.Load(&why, &pinned)) << why;
  std::string warned;
  {
    StderrCapture capture;
    ASSERT_TRUE(fallBack.Score(refused, 7, &scored, &why)) << why;
    warned = capture.str();
  }
  EXPECT_TRUE(StartsWith(warned, "ER0: sentence 7 scored with default scores (1 so far): reordering server ")) << warned;
  EXPECT_FALSE(scored.Served());
  ASSERT_TRUE(scored.HasRows());
  EXPECT_EQ(refused.NumPairs(), scored.NumPairs());
  ASSERT_EQ(fallback.size(), scored.Width());
  for (size_t p = 0; p < refused.NumPairs(); ++p)
    EXPECT_EQ(fallback, std::vector<float>(scored.Row(p), scored.Row(p) + scored.Width())) << "pair " << p;
  EXPECT_EQ(1u, fallBack.stats().failures.load());
  // The next sentence is served again.
  ASSERT_TRUE(fallBack.Score(g_fixture->requests.front(), 8, &scored, &why)) << why;
  EXPECT_TRUE(scored.Served());

  // Without a fallback row (Moses2 without default-scores): no rows, no score.
  SentenceScorer noRow("ER0", Line(Served("on-error=default")), LnFloor, {});
  ASSERT_TRUE(noRow.Load(&why, &pinned)) << why;
  {
    StderrCapture capture;
    ASSERT_TRUE(noRow.Score(refused, 9, &scored, &why)) << why;
  }
  EXPECT_FALSE(scored.HasRows());
  EXPECT_EQ(nullptr, scored.Row(0));
}

// The softmax of own + neighbour over one direction's classes, in double, through the transform.
float Expected(const std::vector<double> &own, const std::vector<double> &neighbour, size_t k) {
  double sum = 0;
  for (size_t j = 0; j < own.size(); ++j) sum += std::exp(own[j] + neighbour[j]);
  return LnFloor(static_cast<float>(std::exp(own[k] + neighbour[k]) / sum));
}

TEST(ContextScore, IsTheSoftmaxOfOwnPlusNeighbourThroughTheDecodersTransform) {
  const float own[] = {1.0f, 2.0f, 0.5f}, neighbour[] = {0.5f, -1.0f, 2.0f};
  double total = 0;
  for (size_t k = 0; k < 3; ++k) {
    const float got = ContextScore(own, neighbour, 3, k, LnFloor);
    EXPECT_NEAR(Expected({1.0, 2.0, 0.5}, {0.5, -1.0, 2.0}, k), got, 1e-6) << k;
    // no neighbour: the softmax of the own scores alone
    EXPECT_NEAR(Expected({1.0, 2.0, 0.5}, {0, 0, 0}, k), ContextScore(own, NULL, 3, k, LnFloor), 1e-6) << k;
    // the same amount added to every class changes nothing
    const float shifted[] = {neighbour[0] + 40.0f, neighbour[1] + 40.0f, neighbour[2] + 40.0f};
    EXPECT_NEAR(got, ContextScore(own, shifted, 3, k, LnFloor), 1e-5) << k;
    total += std::exp(got);
  }
  EXPECT_NEAR(1.0, total, 1e-6);
  EXPECT_GT(ContextScore(own, neighbour, 3, 2, LnFloor), ContextScore(own, NULL, 3, 2, LnFloor));
  // Scores far apart neither overflow nor give NaN: the winner gets ln 1 = 0, the loser the floor.
  const float far[] = {1000.0f, 0.0f, -1000.0f};
  EXPECT_EQ(0.0f, ContextScore(far, NULL, 3, 0, LnFloor));
  EXPECT_EQ(-100.0f, ContextScore(far, NULL, 3, 2, LnFloor));
  // A block of two classes (monotonicity) reads only its two columns.
  const float two[] = {0.0f, std::log(3.0f), 99.0f};
  EXPECT_NEAR(std::log(0.25f), ContextScore(two, NULL, 2, 0, LnFloor), 1e-6);
}

TEST(ContextCache, GivesContextScoresBitsForEveryPairOfBlocksSeenAgainOrNot) {
  // Enough distinct pairs of blocks to make the cache grow several times, each asked for
  // twice, every class, with and without a neighbour (NULL), for 3 and 4 classes.
  for (size_t classes = 3; classes <= kMaxClasses; ++classes) {
    std::vector<float> own(300 * classes), neighbour(40 * classes);
    for (size_t i = 0; i < own.size(); ++i) own[i] = std::sin(0.37 * i) * 7.0f;
    for (size_t i = 0; i < neighbour.size(); ++i) neighbour[i] = std::cos(1.3 * i) * 5.0f;
    ContextCache cache;
    cache.Init(classes, LnFloor);
    size_t compared = 0;
    for (int round = 0; round < 2; ++round) {
      for (size_t o = 0; o < 300; ++o) {
        for (size_t n = 0; n <= 40; n += (o % 5) + 1) {
          const float *a = &own[o * classes], *b = n < 40 ? &neighbour[n * classes] : NULL;
          float all[kMaxClasses];
          ContextScores(a, b, classes, LnFloor, all);
          for (size_t k = 0; k < classes; ++k) {
            const float want = ContextScore(a, b, classes, k, LnFloor);
            ASSERT_EQ(0, std::memcmp(&want, &all[k], sizeof want)) << classes << " " << o << " " << n << " " << k;
            const float got = cache.Score(a, b, k);
            ASSERT_EQ(0, std::memcmp(&want, &got, sizeof want)) << classes << " " << o << " " << n << " " << k;
            ++compared;
          }
        }
      }
    }
    EXPECT_GT(compared, 2 * 4096u);  // past the first table's half: it grew
  }
}

TEST(CompareScores, ComparesValuesInOrderAndPutsAnAbsentRowLast) {
  const float a[] = {-1.0f, -2.0f, -3.0f}, b[] = {-1.0f, -2.0f, -3.0f}, c[] = {-1.0f, -1.5f, -9.0f};
  EXPECT_EQ(0, CompareScores(a, b, 3));
  EXPECT_EQ(0, CompareScores(a, a, 3));
  EXPECT_EQ(-1, CompareScores(a, c, 3));
  EXPECT_EQ(1, CompareScores(c, a, 3));
  EXPECT_EQ(0, CompareScores(a, c, 1));  // only the first n values count
  EXPECT_EQ(0, CompareScores(NULL, NULL, 3));
  EXPECT_EQ(-1, CompareScores(a, NULL, 3));
  EXPECT_EQ(1, CompareScores(NULL, a, 3));
}

TEST(SentenceScorer, AContextModelsBlocksCombineIntoWhatTheModelGivesAPairNextToItsNeighbour) {
  REQUIRE_FIXTURE();
  const std::string line = "type=" + g_fixture->keys.at("moses_type") + " server=" + g_server->address() +
                           " model=" + g_fixture->context_model();
  SentenceScorer scorer("ER0", Line(line), LnFloor, {});
  std::string why, pinned;
  ASSERT_TRUE(scorer.Load(&why, &pinned)) << why;
  EXPECT_TRUE(scorer.context());
  EXPECT_TRUE(EndsWith(pinned, ", with decoder context) pinned for this run")) << pinned;
  const size_t m = std::stoul(g_fixture->keys.at("n_outputs")), K = m / 2;  // bidirectional: two blocks
  size_t checked = 0, moved = 0;
  for (size_t r = 0; r < g_fixture->requests.size(); ++r) {
    const ScoreInput &pairs = g_fixture->requests[r];
    const size_t n = pairs.NumPairs();
    ScoredSentence scored;
    ASSERT_TRUE(scorer.Score(pairs, static_cast<long>(r), &scored, &why)) << why;
    ASSERT_TRUE(scored.Served());
    ASSERT_TRUE(scored.Context());
    ASSERT_EQ(m, scored.Outputs());
    ASSERT_EQ(2 * m, scored.Width());
    // the rows are the model's own blocks, raw
    const std::vector<float> &blocks = g_fixture->context_blocks[r];
    ASSERT_EQ(2 * n * m + m, blocks.size());
    for (size_t p = 0; p < n; ++p)
      for (size_t j = 0; j < m; ++j) {
        ASSERT_NEAR(blocks[p * m + j], scored.Row(p)[j], 1e-6) << "request " << r << " pair " << p;
        ASSERT_NEAR(blocks[n * m + p * m + j], scored.Row(p)[m + j], 1e-6) << "request " << r << " pair " << p;
      }
    for (size_t j = 0; j < m; ++j) ASSERT_NEAR(blocks[2 * n * m + j], scored.Boundary()[j], 1e-6) << j;
    // combined next to a neighbour: what the model gives the pair there (it never adds blocks)
    const std::vector<float> &next = g_fixture->context_next[r];
    ASSERT_EQ(2 * n * m, next.size());
    for (size_t c = 0; c < n; ++c) {
      const float *own = scored.Row(c), *before = scored.Row((c + n - 1) % n) + m, *after = scored.Row((c + 1) % n) + m;
      for (size_t k = 0; k < K; ++k) {
        const float backward = std::exp(scorer.Combine(own, before, k));
        const float forward = std::exp(scorer.Combine(own + K, after + K, k));
        const float first = std::exp(scorer.Combine(own, scored.Boundary(), k));
        ASSERT_NEAR(next[c * m + k], backward, 1e-6) << "request " << r << " pair " << c;
        ASSERT_NEAR(next[c * m + K + k], forward, 1e-6) << "request " << r << " pair " << c;
        ASSERT_NEAR(next[n * m + c * m + k], first, 1e-6) << "request " << r << " pair " << c;
        ASSERT_NEAR(next[n * m + c * m + K + k], std::exp(scorer.Combine(own + K, scored.Boundary() + K, k)), 1e-6);
        moved += std::fabs(backward - first) > 1e-3;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500u);
  EXPECT_GT(moved, checked / 10) << "the neighbour hardly changes the model's probabilities: nothing is tested";
  // A client that reads the answer raw sees the blocks and no probabilities.
  const ScoreResult raw = Client(Options(g_server->address())).Score(g_fixture->context_model(), 0,
                                                                     g_fixture->requests.front());
  EXPECT_TRUE(raw.context());
  EXPECT_TRUE(raw.probabilities.empty());
  EXPECT_EQ(g_fixture->requests.front().NumPairs() * m, raw.scores.size());
}

}  // namespace
}  // namespace reordering
