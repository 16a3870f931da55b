#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "reordering_client.h"

namespace reordering {
namespace testing_support {

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("could not bind a loopback port");
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::vector<std::string> ReadLines(const std::string &path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

ServerProcess::ServerProcess(std::vector<std::string> argv_template, int port, std::string log_path)
    : argv_template_(std::move(argv_template)), port_(port), log_path_(std::move(log_path)) {}

ServerProcess::~ServerProcess() { Stop(); }

void ServerProcess::Start() {
  if (pid_ > 0) return;
  std::vector<std::string> args;
  for (std::string a : argv_template_) {
    for (size_t at; (at = a.find("{port}")) != std::string::npos;) a.replace(at, 6, std::to_string(port_));
    args.push_back(a);
  }
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
}

void ServerProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string ServerProcess::LogTail() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  std::string all = s.str();
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

void ServerProcess::WaitReady(const std::string &model, int timeout_ms, const std::string &tls_root_certs_file) {
  ClientOptions o;
  o.target = address();
  o.timeout_ms = 1000;
  o.tls_root_certs_file = tls_root_certs_file;
  Client client(o);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("scoring server exited during start-up; log:\n" + LogTail());
    }
    try {
      client.GetModel(model);
      return;
    } catch (const ClientError &e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw std::runtime_error("scoring server not ready after " + std::to_string(timeout_ms) + " ms (" + last +
                           "); log:\n" + LogTail());
}

}  // namespace testing_support
}  // namespace reordering
