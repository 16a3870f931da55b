// The fixture of the client tests and the real server they share (one per test binary).
//
// REORDERING_FIXTURE_DIR (made by tests/client/cppfixture.py) holds a model repository
// with two versions of one model trained by our trainer and a model with decoder context,
// real sentences of the ja-en corpus as ScoreRequest JSON lines, the probabilities Python
// computes for them with training.model.load_model(...).predict_proba (one file per
// version), the context model's blocks and its probabilities next to given neighbours, and
// the server's command line. A test environment starts that server once before the first test.
#ifndef MOSES_FF_CLIENT_TESTS_FIXTURE_H_
#define MOSES_FF_CLIENT_TESTS_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdint.h>

#include <map>
#include <string>
#include <vector>

#include "reordering_client.h"
#include "server_process.h"

namespace reordering {
namespace testing_support {

constexpr int kStartupMs = 90000;  // a cold Python + numba start on a busy machine

struct Fixture {
  std::string dir;
  std::map<std::string, std::string> keys;  // fixture.txt
  std::vector<std::string> serve_argv;
  std::vector<ScoreInput> requests;
  std::map<uint64_t, std::vector<std::vector<float>>> expected;  // version -> per request
  // The context model's, per request (cppfixture.py write_context_expectations): its own
  // scores, neighbour block and boundary; each pair's probabilities next to the pair
  // before it (backward) and after it (forward), cyclically, then next to the edges.
  std::vector<std::vector<float>> context_blocks, context_next;

  std::string model() const { return keys.at("model"); }
  std::string context_model() const { return keys.at("context_model"); }
  uint64_t newest() const { return expected.rbegin()->first; }
  uint64_t oldest() const { return expected.begin()->first; }
};

// The fixture and the server started from it; null without REORDERING_FIXTURE_DIR.
extern Fixture *g_fixture;
extern ServerProcess *g_server;

inline ClientOptions Options(const std::string &target, int timeout_ms = 5000) {
  ClientOptions o;
  o.target = target;
  o.timeout_ms = timeout_ms;
  return o;
}

}  // namespace testing_support
}  // namespace reordering

#define REQUIRE_FIXTURE()                                                                            \
  if (!::reordering::testing_support::g_fixture)                                                     \
  GTEST_SKIP() << "REORDERING_FIXTURE_DIR not set: run tests/client/test_cpp_client.py, "            \
                  "which builds the fixture and the real server command"

#endif  // MOSES_FF_CLIENT_TESTS_FIXTURE_H_
