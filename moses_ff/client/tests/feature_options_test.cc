// FeatureOptions (feature_options.h): the keys both decoders' features parse, their
// defaults and error texts, and the end-of-run summary lines. No server needed.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "feature_options.h"

namespace reordering {
namespace {

typedef std::vector<std::pair<std::string, std::string> > Args;

Args Line(const std::string &line) {
  static const char *const kNone[] = {NULL};
  Args args;
  reordering_type::StripKeys("ExternalReordering " + line, kNone, &args);
  return args;
}

const char kMinimal[] = "type=hier-msd-bidirectional-fe server=127.0.0.1:50051 model=ja-en";

TEST(FeatureOptions, DefaultsAndValues) {
  FeatureOptions o;
  std::string why;
  ASSERT_TRUE(o.Parse(Line(kMinimal), &why)) << why;
  EXPECT_EQ(o.server, "127.0.0.1:50051");
  EXPECT_EQ(o.model, "ja-en");
  EXPECT_EQ(o.version, 0u);
  EXPECT_EQ(o.timeout_ms, 5000);
  EXPECT_EQ(o.on_error, FeatureOptions::FAIL);
  EXPECT_EQ(o.input_factor, 0u);
  EXPECT_EQ(o.output_factor, 0u);
  EXPECT_EQ(o.default_scores, "");
  EXPECT_EQ(o.schema.Canonical(), "hier-msd-bidirectional-fe");
  EXPECT_EQ(o.Client().target, "127.0.0.1:50051");
  EXPECT_EQ(o.Client().timeout_ms, 5000);

  FeatureOptions p;
  ASSERT_TRUE(p.Parse(Line(std::string(kMinimal) + " version=7 timeout-ms=250 on-error=default"
                           " input-factor=1,2 output-factor=,3 default-scores=0.5,0.5"), &why)) << why;
  EXPECT_EQ(p.version, 7u);
  EXPECT_EQ(p.timeout_ms, 250);
  EXPECT_EQ(p.Client().timeout_ms, 250);
  EXPECT_EQ(p.on_error, FeatureOptions::USE_DEFAULT);
  EXPECT_EQ(p.input_factor, 1u);
  EXPECT_EQ(p.output_factor, 3u);
  EXPECT_EQ(p.default_scores, "0.5,0.5");
}

TEST(FeatureOptions, RefusedValuesSayWhy) {
  const std::pair<std::string, std::string> cases[] = {  // line, error
    {"type=msd-fe server=a:1 model=m on-error=retry", "on-error=retry (expected fail or default)"},
    {"type=msd-fe server= model=m", "needs server=HOST:PORT and model=NAME"},  // "server=" is no key=value
    {"type=msd-fe server=a:1", "needs server=HOST:PORT and model=NAME"},
    {"type=msd-fe server=a:1 model=m timeout-ms=0", "timeout-ms must be > 0"},
    {"type=msd-fe server=a:1 model=m timeout-ms=soon", "timeout-ms must be > 0"},  // read as 0, as Moses's Scan
    {"type=msd-bidirectional server=a:1 model=m", "reordering type 'msd-bidirectional' names no conditioning (f or fe)"},
  };
  for (const auto &c : cases) {
    FeatureOptions o;
    std::string why;
    EXPECT_FALSE(o.Parse(Line(c.first), &why)) << c.first;
    EXPECT_EQ(why, c.second) << c.first;
  }
}

TEST(FeatureOptions, MismatchNamesBothSchemas) {
  FeatureOptions o;
  std::string why;
  ASSERT_TRUE(o.Parse(Line("type=phrase-msd-bidirectional-fe-collapseff server=a:1 model=ja-en"), &why));
  ModelInfo info;
  info.moses_type = "phrase-msd-bidirectional-fe";
  info.classes = {"mono", "swap", "disc"};
  info.directions = {"backward", "forward"};
  info.outputs.resize(6);
  info.version = 2;
  EXPECT_EQ(o.Mismatch(info), "");  // collapseff is not part of the model
  info.moses_type = "wbe-msd-bidirectional-fe";
  EXPECT_EQ(o.Mismatch(info),
            "served model 'ja-en' version 2 is wbe-msd-bidirectional-fe with 6 outputs, but this "
            "feature's type=phrase-msd-bidirectional-fe-collapseff needs a phrase-msd-bidirectional-fe "
            "model with 6 outputs (kind, orientation set, directions and f/fe conditioning must match)");
}

TEST(FeatureOptions, EachDecoderGetsTheLineWithoutOurKeys) {
  const std::string line = "ExternalReordering name=ER0 num-features=6 type=msd-bidirectional-fe input-factor=0 "
                           "server=a:1 model=m version=2 timeout-ms=9 on-error=default default-scores=0.5,0.5 path=t";
  // Moses's LexicalReordering reads default-scores itself; Moses2's has no such key.
  EXPECT_EQ(DecoderLine(line, MOSES), "ExternalReordering name=ER0 num-features=6 type=msd-bidirectional-fe "
                                      "input-factor=0 default-scores=0.5,0.5 path=t");
  EXPECT_EQ(DecoderLine(line, MOSES2), "ExternalReordering name=ER0 num-features=6 type=msd-bidirectional-fe "
                                       "input-factor=0 path=t");
  EXPECT_THROW(DecoderLine("  ", MOSES), std::invalid_argument);
}

TEST(FeatureOptions, ParseLineReadsEveryKeyOfTheLine) {
  FeatureOptions o;
  std::string why;
  ASSERT_TRUE(o.ParseLine("ExternalReordering name=ER0 " + std::string(kMinimal) + " version=3 path=/t/reordering.gz",
                          &why)) << why;
  EXPECT_EQ(o.model, "ja-en");
  EXPECT_EQ(o.version, 3u);
  EXPECT_EQ(o.path, "/t/reordering.gz");
  FeatureOptions none;
  ASSERT_TRUE(none.ParseLine("ExternalReordering " + std::string(kMinimal), &why)) << why;
  EXPECT_EQ(none.path, "");
  FeatureOptions bad;
  EXPECT_FALSE(bad.ParseLine("ExternalReordering type=msd-fe server=a:1", &why));
  EXPECT_EQ(why, "needs server=HOST:PORT and model=NAME");
}

TEST(FeatureOptions, SummaryLines) {
  RpcStats stats;
  EXPECT_EQ(RpcSummary("ER0", stats), "");
  EXPECT_EQ(FailureSummary("ER0", stats), "");
  stats.calls = 3;
  stats.sentences = 4;
  stats.max_in_flight = 2;
  stats.micros = 1500000;
  stats.failures = 1;
  EXPECT_EQ(RpcSummary("ER0", stats),
            "ER0: 3 Score RPCs for 4 sentences, at most 2 in flight at once, 1.5 s of RPC wall time in all\n");
  EXPECT_EQ(FailureSummary("ER0", stats),
            "ER0: 1 of 4 sentences were scored with default scores because the server failed\n");
}

}  // namespace
}  // namespace reordering
