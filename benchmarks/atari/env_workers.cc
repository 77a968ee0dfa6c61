#include "benchmarks/atari/env_workers.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <opencv2/core.hpp>

namespace mlbench::atari {

namespace {

// One environment's reply to a step, in the shared mapping beside the observations.
struct ReplySlot {
  float reward = 0;
  std::int32_t done = 0;
  std::int32_t episode_score = 0;  // of the episode that ended in this step (done)
  std::int64_t episode_steps = 0;
};
static_assert(sizeof(ReplySlot) <= 64);

constexpr char kStepped = 's';

// The child's whole life: step on every action received, until the parent's end closes.
[[noreturn]] void worker_main(int sock, int index, const EnvConfig& config, std::uint8_t* obs, void* slot_memory,
                              pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);  // the parent died before prctl
  // Interrupts are the parent's to handle: it stops the workers when it ends.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  cv::setNumThreads(0);  // no OpenCV thread pool in a forked child
  try {
    auto* slot = static_cast<ReplySlot*>(slot_memory);
    auto write_slot = [&](float reward, bool done, int score, long steps) {
      *slot = ReplySlot{reward, done ? 1 : 0, score, steps};
    };
    AtariPong env(config.seed + static_cast<std::uint64_t>(index), config.game, config.wrap);
    auto publish = [&] {
      const auto o = env.observation();
      std::memcpy(obs, o.data(), o.size());
      if (::send(sock, &kStepped, 1, MSG_NOSIGNAL) != 1) ::_exit(0);  // the parent is gone
    };
    write_slot(0, false, 0, 0);
    publish();
    int score = 0;
    long steps = 0;
    for (;;) {
      std::int32_t action = 0;
      const ssize_t n = ::recv(sock, &action, sizeof action, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof action)) ::_exit(0);  // closed: the parent is done with us
      const auto r = env.step(action);
      score += r.raw_reward;
      ++steps;
      write_slot(r.reward, r.done, score, steps);
      if (r.done) {
        score = 0;
        steps = 0;
        env.reset();
      }
      publish();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "environment worker %d: %s\n", index, e.what());
    ::_exit(3);
  }
}

std::string describe_end(pid_t pid) {
  // The socket closes as the process exits: give the kernel a moment to make it a zombie.
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFSIGNALED(status)) {
        return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
      }
      if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
      break;
    }
    if (r < 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "closed its socket";
}

}  // namespace

EnvWorkers::EnvWorkers(int count, EnvConfig config) : config_(config) {
  if (count < 1) throw std::invalid_argument("EnvWorkers: at least one environment");
  obs_bytes_ = AtariPong::observation_bytes(config.wrap);
  // Slots start on a 64-byte boundary after the observations.
  const std::size_t obs_total = static_cast<std::size_t>(count) * obs_bytes_;
  slot_stride_ = 64;
  slots_at_ = (obs_total + 63) / 64 * 64;
  mapping_bytes_ = slots_at_ + static_cast<std::size_t>(count) * slot_stride_;
  mapping_ = ::mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw std::runtime_error(fmt::format("cannot map {} bytes of shared memory for {} environments: {}", mapping_bytes_,
                                         count, std::strerror(errno)));
  }
  rewards_.assign(count, 0.0f);
  dones_.assign(count, 0);
  const pid_t parent = ::getpid();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  for (int i = 0; i < count; ++i) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      throw std::runtime_error(
          fmt::format("cannot create the socket of environment worker {}: {}", i, std::strerror(errno)));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(pair[0]);
      ::close(pair[1]);
      throw std::runtime_error(
          fmt::format("cannot start environment worker {} of {}: fork: {}", i, count, std::strerror(err)));
    }
    if (pid == 0) {
      for (int s : sockets_) ::close(s);  // the other workers' parent ends
      ::close(pair[0]);
      auto* base = static_cast<std::uint8_t*>(mapping_);
      worker_main(pair[1], i, config_, base + static_cast<std::size_t>(i) * obs_bytes_, slot_memory(i), parent);
    }
    ::close(pair[1]);
    pids_.push_back(pid);
    sockets_.push_back(pair[0]);
  }
  wait_replies();
}

EnvWorkers::~EnvWorkers() {
  for (int s : sockets_) ::close(s);
  for (pid_t pid : pids_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

void* EnvWorkers::slot_memory(int i) const {
  return static_cast<std::uint8_t*>(mapping_) + slots_at_ + static_cast<std::size_t>(i) * slot_stride_;
}

std::span<const std::uint8_t> EnvWorkers::observations() const {
  return {static_cast<const std::uint8_t*>(mapping_), static_cast<std::size_t>(count()) * obs_bytes_};
}

void EnvWorkers::fail(int i, const std::string& what) {
  failed_ = true;
  throw WorkerFailed(fmt::format("environment worker {} of {} (pid {}) {}", i, count(), pids_[i], what));
}

void EnvWorkers::step_async(std::span<const int> actions) {
  if (actions.size() != static_cast<std::size_t>(count()))
    throw std::invalid_argument("step_async: one action per environment");
  if (failed_) throw WorkerFailed("environment workers: a worker failed before");
  for (int i = 0; i < count(); ++i) {
    const std::int32_t a = actions[i];
    if (::send(sockets_[i], &a, sizeof a, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof a)) {
      fail(i, "died: " + describe_end(pids_[i]));
    }
  }
}

void EnvWorkers::wait_replies() {
  std::vector<pollfd> pending;
  std::vector<int> index;
  for (int i = 0; i < count(); ++i) {
    pending.push_back({sockets_[i], POLLIN, 0});
    index.push_back(i);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config_.reply_timeout_s);
  while (!pending.empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(pending.data(), pending.size(), static_cast<int>(std::max<long>(left.count(), 0)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("waiting on the environment workers: poll: {}", std::strerror(errno)));
    }
    if (ready == 0) {
      fail(index[0], fmt::format("did not answer within {:g} s (see --reply-timeout)", config_.reply_timeout_s));
    }
    for (std::size_t k = 0; k < pending.size();) {
      if (pending[k].revents == 0) {
        ++k;
        continue;
      }
      char reply = 0;
      const ssize_t n = ::recv(pending[k].fd, &reply, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1 || reply != kStepped) fail(index[k], "died: " + describe_end(pids_[index[k]]));
      pending.erase(pending.begin() + static_cast<long>(k));
      index.erase(index.begin() + static_cast<long>(k));
    }
  }
}

void EnvWorkers::step_wait() {
  wait_replies();
  for (int i = 0; i < count(); ++i) {
    const ReplySlot& s = *static_cast<const ReplySlot*>(slot_memory(i));
    rewards_[i] = s.reward;
    dones_[i] = s.done ? 1 : 0;
    if (s.done) episodes_.push_back({i, s.episode_score, static_cast<long>(s.episode_steps)});
  }
}

std::vector<Episode> EnvWorkers::take_episodes() {
  std::vector<Episode> out;
  out.swap(episodes_);
  return out;
}

}  // namespace mlbench::atari
