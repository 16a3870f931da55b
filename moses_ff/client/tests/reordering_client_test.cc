// The client against the real Python scoring server (`moses-reorder serve`), started from
// the fixture (fixture.h); every test here talks to a server process started from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <thread>

#include "fixture.h"
#include "reordering_client.h"
#include "server_process.h"

namespace reordering {
namespace {

using testing_support::FreeLoopbackPort;
using testing_support::g_fixture;
using testing_support::g_server;
using testing_support::kStartupMs;
using testing_support::Options;
using testing_support::ServerProcess;

void ExpectRowsEqual(const std::vector<float> &expected, const ScoreResult &got, const std::string &what) {
  ASSERT_EQ(expected.size(), got.probabilities.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(expected[i], got.probabilities[i], 1e-6) << what << " value " << i;
  }
}

TEST(ResolveTarget, SingleAddressAndUrisPassThrough) {
  EXPECT_EQ("localhost:50051", ResolveTarget("localhost:50051"));
  EXPECT_EQ("dns:///scorer:50051", ResolveTarget("dns:///scorer:50051"));
  EXPECT_EQ("ipv4:10.0.0.1:1,10.0.0.2:2", ResolveTarget("ipv4:10.0.0.1:1,10.0.0.2:2"));
}

TEST(ResolveTarget, AddressListBecomesIpv4Uri) {
  EXPECT_EQ("ipv4:127.0.0.1:1,127.0.0.1:2", ResolveTarget("127.0.0.1:1,127.0.0.1:2"));
  EXPECT_EQ("ipv6:[::1]:1,[::1]:2", ResolveTarget("[::1]:1,[::1]:2"));
}

TEST(ResolveTarget, HostNameListIsRefusedWithAClearMessage) {
  try {
    ResolveTarget("a.example:1,b.example:2");
    FAIL() << "no error";
  } catch (const ClientError &e) {
    EXPECT_EQ(3, e.code());
    EXPECT_NE(std::string(e.what()).find("'a.example:1' is not a numeric"), std::string::npos) << e.what();
  }
}

TEST(ScoreInputBuilder, BuildsTheSameArraysAsTheProtoContract) {
  REQUIRE_FIXTURE();
  // Rebuild the first request from its strings; the fixture's token table is in order
  // of first appearance (source, then each pair's target), like the builder's.
  const ScoreInput &want = g_fixture->requests.front();
  auto token = [&](uint32_t t) {
    return want.token_bytes.substr(want.token_offsets[t], want.token_offsets[t + 1] - want.token_offsets[t]);
  };
  ScoreInputBuilder b;
  for (uint32_t t : want.source) b.AddSourceToken(token(t));
  for (size_t p = 0; p < want.NumPairs(); ++p) {
    std::vector<uint32_t> tgt, as, at;
    for (uint32_t i = want.target_offsets[p]; i < want.target_offsets[p + 1]; ++i) tgt.push_back(b.Token(token(want.target_tokens[i])));
    for (uint32_t i = want.align_offsets[p]; i < want.align_offsets[p + 1]; ++i) {
      as.push_back(want.align_source[i]);
      at.push_back(want.align_target[i]);
    }
    b.AddPair(want.span_start[p], want.span_end[p], tgt, as, at);
  }
  ScoreInput got = b.Release();
  EXPECT_EQ(want.token_bytes, got.token_bytes);
  EXPECT_EQ(want.token_offsets, got.token_offsets);
  EXPECT_EQ(want.source, got.source);
  EXPECT_EQ(want.span_start, got.span_start);
  EXPECT_EQ(want.span_end, got.span_end);
  EXPECT_EQ(want.target_offsets, got.target_offsets);
  EXPECT_EQ(want.target_tokens, got.target_tokens);
  EXPECT_EQ(want.align_offsets, got.align_offsets);
  EXPECT_EQ(want.align_source, got.align_source);
  EXPECT_EQ(want.align_target, got.align_target);
}

TEST(ScoreInputBuilder, APairAWordAtATimeIsTheSameAsAWholePair) {
  // A decoder's walk: the pair started last takes the target tokens and alignment points.
  ScoreInputBuilder whole, walked;
  for (const char *w : {"kare", "wa", "kita"}) {
    whole.AddSourceToken(w);
    walked.AddSourceToken(w);
  }
  whole.AddPair(0, 2, {whole.Token("he"), whole.Token("came")}, {0, 1}, {0, 1});
  whole.AddPair(2, 3, {}, {}, {});
  whole.AddPair(1, 3, {whole.Token("came"), whole.Token("here")}, {1}, {0});
  walked.StartPair(0, 2);
  walked.AddTargetToken("he");
  walked.AddAlignmentPoint(0, 0);
  walked.AddTargetToken("came");
  walked.AddAlignmentPoint(1, 1);
  walked.StartPair(2, 3);
  walked.StartPair(1, 3);
  walked.AddTargetToken("came");
  walked.AddTargetToken("here");
  walked.AddAlignmentPoint(1, 0);
  const ScoreInput &a = whole.input(), &b = walked.input();
  EXPECT_EQ(3u, b.NumPairs());
  EXPECT_EQ(a.token_bytes, b.token_bytes);
  EXPECT_EQ(a.token_offsets, b.token_offsets);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.span_start, b.span_start);
  EXPECT_EQ(a.span_end, b.span_end);
  EXPECT_EQ(a.target_offsets, b.target_offsets);
  EXPECT_EQ(a.target_tokens, b.target_tokens);
  EXPECT_EQ(a.align_offsets, b.align_offsets);
  EXPECT_EQ(a.align_source, b.align_source);
  EXPECT_EQ(a.align_target, b.align_target);

  ScoreInputBuilder none;
  EXPECT_THROW(none.AddTargetToken("he"), std::logic_error);
  EXPECT_THROW(none.AddAlignmentPoint(0, 0), std::logic_error);
}

TEST(Client, GetModelReportsTheSchemaAndLoadedVersions) {
  REQUIRE_FIXTURE();
  Client client(Options(g_server->address()));
  ModelInfo info = client.GetModel(g_fixture->model());
  EXPECT_EQ(g_fixture->model(), info.name);
  EXPECT_EQ(g_fixture->keys.at("moses_type"), info.moses_type);
  EXPECT_EQ(g_fixture->newest(), info.version);
  EXPECT_EQ(std::stoul(g_fixture->keys.at("n_outputs")), info.outputs.size());
  for (const auto &kv : g_fixture->expected) {
    EXPECT_NE(std::find(info.loaded_versions.begin(), info.loaded_versions.end(), kv.first), info.loaded_versions.end())
        << "version " << kv.first << " not loaded";
  }
  EXPECT_EQ(g_fixture->oldest(), client.GetModel(g_fixture->model(), g_fixture->oldest()).version);
}

TEST(Client, EveryRetrySettingGivesAWorkingChannel) {
  REQUIRE_FIXTURE();
  for (int attempts : {1, 2, 5, 9}) {
    ClientOptions o = Options(g_server->address());
    o.max_attempts = attempts;
    Client client(o);
    EXPECT_EQ(g_fixture->newest(), client.GetModel(g_fixture->model()).version) << attempts << " attempts";
  }
}

TEST(Client, ScoresEqualThePythonPathForEveryVersion) {
  REQUIRE_FIXTURE();
  Client client(Options(g_server->address()));
  size_t n_values = 0, n_differ = 0;
  for (size_t r = 0; r < g_fixture->requests.size(); ++r) {
    ScoreResult newest = client.Score(g_fixture->model(), 0, g_fixture->requests[r]);
    EXPECT_EQ(g_fixture->newest(), newest.version);
    EXPECT_EQ(std::stoul(g_fixture->keys.at("n_outputs")), newest.NumOutputs());
    ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][r], newest, "newest, request " + std::to_string(r));
    // Version pinning: the older version answers with its own weights.
    ScoreResult pinned = client.Score(g_fixture->model(), g_fixture->oldest(), g_fixture->requests[r]);
    EXPECT_EQ(g_fixture->oldest(), pinned.version);
    ExpectRowsEqual(g_fixture->expected[g_fixture->oldest()][r], pinned, "pinned, request " + std::to_string(r));
    for (size_t i = 0; i < pinned.probabilities.size(); ++i) {
      n_differ += std::fabs(pinned.probabilities[i] - newest.probabilities[i]) > 1e-4;
    }
    n_values += pinned.probabilities.size();
  }
  EXPECT_GT(n_values, 0u);
  EXPECT_GT(n_differ, 0u) << "the two versions score identically; pinning would not be observable";
}

TEST(Client, UnloadedVersionAndUnknownModelAreClearErrors) {
  REQUIRE_FIXTURE();
  Client client(Options(g_server->address()));
  try {
    client.Score(g_fixture->model(), 987654, g_fixture->requests.front());
    FAIL() << "no error for an unloaded version";
  } catch (const ClientError &e) {
    EXPECT_EQ(9, e.code()) << e.what();  // FAILED_PRECONDITION
    EXPECT_NE(std::string(e.what()).find("FAILED_PRECONDITION"), std::string::npos) << e.what();
  }
  try {
    client.GetModel("no-such-model");
    FAIL() << "no error for an unknown model";
  } catch (const ClientError &e) {
    EXPECT_EQ(5, e.code()) << e.what();  // NOT_FOUND
    EXPECT_NE(std::string(e.what()).find("no-such-model"), std::string::npos) << e.what();
  }
}

TEST(Client, ServerDownIsAClearErrorWithinTheDeadline) {
  REQUIRE_FIXTURE();
  const int port = FreeLoopbackPort();  // nothing listens there
  const std::string target = "127.0.0.1:" + std::to_string(port);
  Client client(Options(target, 1500));
  auto t0 = std::chrono::steady_clock::now();
  try {
    client.Score(g_fixture->model(), 0, g_fixture->requests.front());
    FAIL() << "no error with no server";
  } catch (const ClientError &e) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LE(ms, 1500 + 500) << "took " << ms << " ms";
    EXPECT_TRUE(e.code() == 14 || e.code() == 4) << e.what();  // UNAVAILABLE or DEADLINE_EXCEEDED
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Score(model=" + g_fixture->model()), std::string::npos) << e.what();
  }
}

TEST(Client, ARestartedServerIsPickedUpAgain) {
  REQUIRE_FIXTURE();
  ServerProcess server(g_fixture->serve_argv, FreeLoopbackPort(), g_fixture->dir + "/server-restart.log");
  server.Start();
  server.WaitReady(g_fixture->model(), kStartupMs);
  Client client(Options(server.address(), 3000));
  const ScoreInput &req = g_fixture->requests.front();
  ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][0], client.Score(g_fixture->model(), 0, req), "before");

  server.Stop();
  EXPECT_THROW(client.Score(g_fixture->model(), 0, req), ClientError);

  server.Start();
  server.WaitReady(g_fixture->model(), kStartupMs);  // a separate probe client
  // The old client's channel reconnects within its capped backoff (1 s, +20% jitter);
  // calls made before that may still see UNAVAILABLE.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  std::unique_ptr<ScoreResult> after;
  while (!after && std::chrono::steady_clock::now() < until) {
    try {
      after.reset(new ScoreResult(client.Score(g_fixture->model(), 0, req)));
    } catch (const ClientError &) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(after) << "the old client did not reach the restarted server within 3 s";
  ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][0], *after, "after");
}

TEST(Client, ManyThreadsShareOneClient) {
  REQUIRE_FIXTURE();
  Client client(Options(g_server->address(), 20000));
  std::atomic<int> wrong{0}, failed{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 3; ++k) {
        for (size_t r = t % 2; r < g_fixture->requests.size(); r += 2) {
          uint64_t v = (r + k) % 2 ? g_fixture->oldest() : 0;
          try {
            ScoreResult got = client.Score(g_fixture->model(), v, g_fixture->requests[r]);
            const auto &want = g_fixture->expected.at(v ? v : g_fixture->newest())[r];
            bool same = want.size() == got.probabilities.size();
            for (size_t i = 0; same && i < want.size(); ++i) same = std::fabs(want[i] - got.probabilities[i]) <= 1e-6;
            wrong += !same;
            ++done;
          } catch (const ClientError &) {
            ++failed;
          }
        }
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failed.load());
  EXPECT_EQ(0, wrong.load());
  EXPECT_EQ(static_cast<int>(3 * 4 * g_fixture->requests.size()), done.load());
}

TEST(Client, RoundRobinOverTwoReplicasSurvivesLosingOne) {
  REQUIRE_FIXTURE();
  ServerProcess second(g_fixture->serve_argv, FreeLoopbackPort(), g_fixture->dir + "/server-replica.log");
  second.Start();
  second.WaitReady(g_fixture->model(), kStartupMs);
  Client client(Options(g_server->address() + "," + second.address()));
  EXPECT_EQ("ipv4:" + g_server->address() + "," + second.address(), client.resolved_target());
  const ScoreInput &req = g_fixture->requests.front();
  for (int i = 0; i < 6; ++i) {
    ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][0], client.Score(g_fixture->model(), 0, req), "both up");
  }
  second.Stop();
  for (int i = 0; i < 6; ++i) {
    ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][0], client.Score(g_fixture->model(), 0, req), "one down");
  }
}

TEST(Client, TlsWithTheServersCertificateAsRootGetsTheSameScores) {
  REQUIRE_FIXTURE();
  const std::string cert = g_fixture->dir + "/tls/server.crt";
  std::vector<std::string> argv = g_fixture->serve_argv;
  argv.insert(argv.end(), {"--tls-cert", cert, "--tls-key", g_fixture->dir + "/tls/server.key"});
  ServerProcess server(argv, FreeLoopbackPort(), g_fixture->dir + "/server-tls.log");
  server.Start();
  server.WaitReady(g_fixture->model(), kStartupMs, cert);
  ClientOptions o = Options(server.address());
  o.tls_root_certs_file = cert;
  Client client(o);
  for (size_t i = 0; i < g_fixture->requests.size(); ++i) {
    ExpectRowsEqual(g_fixture->expected[g_fixture->newest()][i],
                    client.Score(g_fixture->model(), 0, g_fixture->requests[i]), "tls request " + std::to_string(i));
  }
  ClientOptions plain = Options(server.address(), 2000);  // plaintext to a TLS server gets nowhere
  plain.max_attempts = 1;
  try {
    Client(plain).GetModel(g_fixture->model());
    FAIL() << "a plaintext client reached a TLS server";
  } catch (const ClientError &e) {
    EXPECT_EQ(14, e.code()) << e.what();
  }
  ClientOptions missing = Options(server.address());
  missing.tls_root_certs_file = g_fixture->dir + "/tls/missing.pem";
  try {
    Client unusable(missing);
    FAIL() << "no error for an unreadable root certificate file";
  } catch (const ClientError &e) {
    EXPECT_EQ(3, e.code());
    EXPECT_NE(std::string(e.what()).find("missing.pem"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reordering
