// portal_splice: relays bytes between two connected TCP sockets with splice(2) through one kernel pipe per direction,
// so relayed bytes never reach JavaScript. Used by the zero_copy proxy mode (src/services/relay/zeroCopy.ts).
//
// Ownership: start() dups both socket fds and creates two pipes; these six fds belong to the relay thread from then
// on, which closes them all before reporting completion. Node keeps its own fds and closes them when JS destroys the
// sockets, so a connection closes once both have let go.
//
// One relay thread (started on first use, never joined) serves every session of the process with its own epoll set,
// edge-triggered. Completion reaches JS through a thread-safe function per session, which keeps the event loop alive
// only while its session relays.
//
// Closing lingers, so that closing a socket does not reset it: closing a TCP socket with unread input makes Linux
// send RST instead of FIN, and a peer that gets RST may discard bytes it received but has not read yet (a backend's
// final kick message). When one side reaches end of stream, it gets FIN at once and nothing more, its pipe flushes
// into the other side, which then gets FIN too, and what the other side still sends is read and discarded until it
// closes as well or the grace period ends.
//
// setKeepAlive() sets the TCP keepalive parameters Node cannot set (interval, count) on a socket fd.

#include <node_api.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// How long a closing session keeps flushing its pipes toward a destination that does not read, and reading a side
// that does not close, counted from the first end.
constexpr int64_t kFlushGraceMs = 2000;
constexpr size_t kSpliceMax = 1 << 20;
// Bytes discarded per recv() while lingering; with MSG_TRUNC, TCP does not even copy them.
constexpr size_t kDiscardChunk = 64 * 1024;
constexpr unsigned kSpliceFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
// Rounds of splicing a session gets per wake-up before the others get their turn.
constexpr int kPumpBudget = 32;
constexpr int kClient = 0;
constexpr int kBackend = 1;
// epoll data of the wake-up eventfd; session ids start at 1.
constexpr uint64_t kWakeId = 0;
constexpr napi_type_tag kHandleTag = {0x7a8f3c1d2e4b5a69ULL, 0x91c2d3e4f5a6b7c8ULL};

enum class Reason { ClientClosed, BackendClosed, Cancelled, Error };

int64_t clockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void closeFd(int fd) {
  if (fd >= 0) close(fd);
}

// Errors that mean the peer or the network ended the connection, as opposed to a fault of the relay.
const char* connectionErrorName(int error) {
  switch (error) {
    case ECONNRESET: return "ECONNRESET";
    case EPIPE: return "EPIPE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNABORTED: return "ECONNABORTED";
    case ENOTCONN: return "ENOTCONN";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENETUNREACH: return "ENETUNREACH";
    case ENETDOWN: return "ENETDOWN";
    case EHOSTDOWN: return "EHOSTDOWN";
    default: return nullptr;
  }
}

// Node-style code of an errno a socket option call can fail with; null for others.
const char* errnoName(int error) {
  if (const char* name = connectionErrorName(error)) return name;
  switch (error) {
    case EBADF: return "EBADF";
    case ENOTSOCK: return "ENOTSOCK";
    case EINVAL: return "EINVAL";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case ENOMEM: return "ENOMEM";
    case ENOBUFS: return "ENOBUFS";
    default: return nullptr;
  }
}

// Counters of one session, indexed by source side: bytes[kClient] went client -> backend and pending[kClient] waits
// in the pipe toward the backend.
struct Counters {
  uint64_t bytes[2];
  int64_t lastReadMs[2];
  uint64_t pending[2];
};

// Per session, shared by the JS handle, the relay thread and the completion callback. The relay thread writes the
// atomics, JS reads them at any time.
struct Shared {
  uint64_t id = 0;
  std::atomic<uint64_t> bytes[2]{};
  std::atomic<int64_t> lastReadMs[2]{};
  std::atomic<uint64_t> pending[2]{};
  std::atomic<bool> finished{false};
  std::mutex mutex;  // guards tsfn: Node may finalize it while the relay thread is about to call it
  napi_threadsafe_function tsfn = nullptr;  // null once released by the relay thread or finalized by Node

  Counters counters() const {
    Counters c;
    for (int side : {kClient, kBackend}) {
      c.bytes[side] = bytes[side].load(std::memory_order_relaxed);
      c.lastReadMs[side] = lastReadMs[side].load(std::memory_order_relaxed);
      c.pending[side] = pending[side].load(std::memory_order_relaxed);
    }
    return c;
  }
};

struct Result {
  Reason reason;
  int error;  // 0 for a clean end of stream or a cancel
  Counters counters;
};

// What the relay does with a side's input.
enum class Input {
  Forward,  // into its pipe
  Discard,  // read and dropped: the other side's peer is gone, but closing with unread input would reset
  Done,     // not read: end of stream, error, or cancelled
};

// Relay-thread state of one session; its destructor closes the fds it owns.
struct Session {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  int socket[2] = {-1, -1};               // dups of the client and backend fds
  int pipe[2][2] = {{-1, -1}, {-1, -1}};  // pipe[source side] = {read end, write end}
  Input input[2] = {Input::Forward, Input::Forward};
  bool eof[2] = {false, false};        // by source side: it ended cleanly, so its destination gets FIN once flushed
  bool cantWrite[2] = {false, false};  // by destination side: shut down, failed a write or ended in error
  bool closing = false;
  Reason reason = Reason::Error;
  int error = 0;

  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    for (int fd : socket) closeFd(fd);
    for (auto& ends : pipe)
      for (int fd : ends) closeFd(fd);
  }
};

// A non-blocking close-on-exec dup of a socket fd, or -1 with `error` set.
int dupSocket(int fd, std::string& error) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    error = "fd " + std::to_string(fd) + " is not a socket";
    return -1;
  }
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  int flags = copy < 0 ? -1 : fcntl(copy, F_GETFL);
  if (flags < 0 || fcntl(copy, F_SETFL, flags | O_NONBLOCK) != 0) {
    error = std::string("cannot duplicate fd ") + std::to_string(fd) + ": " + strerror(errno);
    closeFd(copy);
    return -1;
  }
  return copy;
}

std::unique_ptr<Session> openSession(int clientFd, int backendFd, std::string& error) {
  auto session = std::make_unique<Session>();
  session->socket[kClient] = dupSocket(clientFd, error);
  if (session->socket[kClient] < 0) return nullptr;
  session->socket[kBackend] = dupSocket(backendFd, error);
  if (session->socket[kBackend] < 0) return nullptr;
  for (auto& ends : session->pipe) {
    if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0) {
      error = std::string("cannot create a pipe: ") + strerror(errno);
      return nullptr;
    }
  }
  int64_t now = clockMs(CLOCK_REALTIME);
  for (auto& last : session->shared->lastReadMs) last.store(now, std::memory_order_relaxed);
  return session;
}

// Hands a result to JS, or drops it when Node is tearing the environment down.
void report(Shared& shared, std::unique_ptr<Result> result) {
  shared.finished.store(true);
  std::lock_guard<std::mutex> lock(shared.mutex);
  if (shared.tsfn == nullptr) return;
  if (napi_call_threadsafe_function(shared.tsfn, result.get(), napi_tsfn_nonblocking) == napi_ok) result.release();
  napi_release_threadsafe_function(shared.tsfn, napi_tsfn_release);
  shared.tsfn = nullptr;
}

struct Command {
  std::unique_ptr<Session> add;  // a new session, or null to cancel `cancel`
  uint64_t cancel = 0;
};

class Relay {
 public:
  // The process-wide relay, started on first use; null if it could not start. Never destroyed: the detached thread
  // may still run while static destructors do at exit.
  static Relay* get() {
    static Relay* const relay = start();
    return relay;
  }

  void add(std::unique_ptr<Session> session) { submit({std::move(session), 0}); }
  void cancel(uint64_t id) { submit({nullptr, id}); }

 private:
  Relay(int epoll, int wake) : epoll_(epoll), wake_(wake) {}

  static Relay* start() {
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kWakeId;
    if (epoll < 0 || wake < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &event) != 0) {
      closeFd(epoll);
      closeFd(wake);
      return nullptr;
    }
    auto* relay = new Relay(epoll, wake);
    // Signals stay with Node's threads; a SIGPIPE raised by a splice to a reset socket stays pending here, harmless.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_t thread;
    int failed = pthread_create(&thread, nullptr, &Relay::main, relay);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (failed != 0) {
      closeFd(epoll);
      closeFd(wake);
      delete relay;
      return nullptr;
    }
    pthread_setname_np(thread, "portal-splice");
    pthread_detach(thread);
    return relay;
  }

  static void* main(void* relay) {
    static_cast<Relay*>(relay)->run();
    return nullptr;
  }

  void submit(Command command) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands_.push_back(std::move(command));
    }
    uint64_t one = 1;
    ssize_t ignored = write(wake_, &one, sizeof one);  // can only fail when the counter is already non-zero
    (void)ignored;
  }

  void run() {
    epoll_event events[256];
    for (;;) {
      int count = epoll_wait(epoll_, events, 256, timeoutMs());
      for (int i = 0; i < count; ++i) {
        uint64_t id = events[i].data.u64;
        if (id == kWakeId) takeCommands();
        else pump(id);
      }
      std::vector<uint64_t> again;
      again.swap(again_);
      for (uint64_t id : again) pump(id);
      expire();
    }
  }

  // 0 while a session has work left from its budget, else until the nearest flush deadline.
  int timeoutMs() const {
    if (!again_.empty()) return 0;
    if (closing_.empty()) return -1;
    int64_t next = INT64_MAX;
    for (const auto& [id, deadline] : closing_) next = std::min(next, deadline);
    return int(std::clamp<int64_t>(next - clockMs(CLOCK_MONOTONIC), 0, kFlushGraceMs));
  }

  void takeCommands() {
    uint64_t count;
    ssize_t ignored = read(wake_, &count, sizeof count);
    (void)ignored;
    std::vector<Command> commands;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands.swap(commands_);
    }
    for (Command& command : commands) {
      if (command.add) adopt(std::move(command.add));
      else stop(command.cancel);
    }
  }

  void adopt(std::unique_ptr<Session> owned) {
    Session& session = *owned;
    uint64_t id = session.shared->id;
    sessions_.emplace(id, std::move(owned));
    for (int fd : session.socket) {
      epoll_event event{};
      event.events = EPOLLIN | EPOLLOUT | EPOLLET;
      event.data.u64 = id;
      if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
        for (Input& input : session.input) input = Input::Done;
        beginClosing(session, Reason::Error, errno, 0);
        break;
      }
    }
    pump(id);
  }

  // Cancel: write out what the destinations take right now, then finish.
  void stop(uint64_t id) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;
    Session& session = *found->second;
    for (Input& input : session.input) input = Input::Done;
    beginClosing(session, Reason::Cancelled, 0, 0);
    pump(id);
  }

  // Splices while anything moves, up to the budget. Edge-triggered epoll only reports changes, so a session stops
  // only when every splice would block (or has nothing to do), or it goes on the again list.
  void pump(uint64_t id) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;  // finished earlier in this batch
    Session& session = *found->second;
    for (int round = 0; round < kPumpBudget; ++round) {
      bool moved = false;
      for (int side : {kClient, kBackend}) {
        moved |= intake(session, side);
        moved |= drain(session, side);
      }
      halfClose(session);
      if (session.closing && finished(session)) return finish(id);
      if (!moved) return;
    }
    again_.push_back(id);
  }

  bool intake(Session& session, int side) {
    switch (session.input[side]) {
      case Input::Forward: return fill(session, side);
      case Input::Discard: return discard(session, side);
      case Input::Done: return false;
    }
    return false;
  }

  // Source socket -> its pipe. Returns whether anything changed.
  bool fill(Session& session, int side) {
    ssize_t n = splice(session.socket[side], nullptr, session.pipe[side][1], nullptr, kSpliceMax, kSpliceFlags);
    if (n > 0) {
      Shared& shared = *session.shared;
      shared.pending[side].fetch_add(n, std::memory_order_relaxed);
      shared.bytes[side].fetch_add(n, std::memory_order_relaxed);
      shared.lastReadMs[side].store(clockMs(CLOCK_REALTIME), std::memory_order_relaxed);
      return true;
    }
    if (n < 0 && errno == EAGAIN) return false;
    if (n < 0 && errno == EINTR) return true;
    ended(session, side, n == 0 ? 0 : errno);
    return true;
  }

  // Source socket -> nowhere, neither counted nor copied. Returns whether anything changed.
  bool discard(Session& session, int side) {
    ssize_t n = recv(session.socket[side], discarded_, kDiscardChunk, MSG_TRUNC | MSG_DONTWAIT);
    if (n > 0) return true;
    if (n < 0 && errno == EAGAIN) return false;
    if (n < 0 && errno == EINTR) return true;
    ended(session, side, n == 0 ? 0 : errno);
    return true;
  }

  // Pipe -> destination socket. Returns whether anything changed.
  bool drain(Session& session, int side) {
    int destination = 1 - side;
    std::atomic<uint64_t>& pending = session.shared->pending[side];
    size_t length = pending.load(std::memory_order_relaxed);
    if (length == 0 || session.cantWrite[destination]) return false;
    ssize_t n = splice(session.pipe[side][0], nullptr, session.socket[destination], nullptr, length, kSpliceFlags);
    if (n > 0) {
      pending.fetch_sub(n, std::memory_order_relaxed);
      return true;
    }
    if (n < 0 && errno == EAGAIN) return false;
    if (n < 0 && errno == EINTR) return true;
    session.cantWrite[destination] = true;
    ended(session, destination, n == 0 ? EPIPE : errno);
    return true;
  }

  // `side` reached end of stream (error 0) or failed.
  void ended(Session& session, int side, int error) {
    int other = 1 - side;
    session.input[side] = Input::Done;
    if (error != 0) {
      // Nothing left to be polite to: no more reading at all, and a side in error takes no more bytes either.
      session.cantWrite[side] = true;
      session.input[other] = Input::Done;
    } else {
      session.eof[side] = true;
      if (!session.closing) {
        // The first end: its peer is gone, so the bytes toward it are dropped and it gets FIN now; the other side
        // is still read, into nowhere, so that closing it later does not reset it.
        shutdownWrite(session, side);
        if (session.input[other] == Input::Forward) session.input[other] = Input::Discard;
      }
    }
    Reason reason = side == kClient ? Reason::ClientClosed : Reason::BackendClosed;
    if (error != 0 && connectionErrorName(error) == nullptr) reason = Reason::Error;
    beginClosing(session, reason, error, kFlushGraceMs);
  }

  // FIN to the peer of `side` after what its socket already holds; nothing more is written to it.
  static void shutdownWrite(Session& session, int side) {
    if (session.cantWrite[side]) return;
    shutdown(session.socket[side], SHUT_WR);
    session.cantWrite[side] = true;
  }

  // A side whose source ended cleanly gets FIN after the last byte of its pipe.
  static void halfClose(Session& session) {
    for (int side : {kClient, kBackend})
      if (session.eof[side] && session.shared->pending[side].load(std::memory_order_relaxed) == 0)
        shutdownWrite(session, 1 - side);
  }

  // The pipes flush and lingering sides are read until the deadline. The first end names the reason, later ones can
  // only shorten the deadline.
  void beginClosing(Session& session, Reason reason, int error, int64_t graceMs) {
    int64_t deadline = clockMs(CLOCK_MONOTONIC) + graceMs;
    uint64_t id = session.shared->id;
    if (session.closing) {
      closing_[id] = std::min(closing_[id], deadline);
      return;
    }
    session.closing = true;
    session.reason = reason;
    session.error = error;
    closing_[id] = deadline;
  }

  // Nothing left to read, nothing left to write.
  static bool finished(const Session& session) {
    for (int side : {kClient, kBackend}) {
      if (session.input[side] != Input::Done) return false;
      bool empty = session.shared->pending[side].load(std::memory_order_relaxed) == 0;
      if (!empty && !session.cantWrite[1 - side]) return false;
    }
    return true;
  }

  void expire() {
    int64_t now = clockMs(CLOCK_MONOTONIC);
    std::vector<uint64_t> due;
    for (const auto& [id, deadline] : closing_)
      if (deadline <= now) due.push_back(id);
    for (uint64_t id : due) finish(id);
  }

  void finish(uint64_t id) {
    auto found = sessions_.find(id);
    std::unique_ptr<Session> session = std::move(found->second);
    sessions_.erase(found);
    closing_.erase(id);
    // Node still holds the same sockets, so closing our dups alone would leave them registered here.
    for (int fd : session->socket) epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    // Sides still writable (a cancel, the healthy side after an error, an expired deadline) get FIN after what they
    // accepted, rather than whatever closing the last fd would send.
    for (int side : {kClient, kBackend}) shutdownWrite(*session, side);
    std::shared_ptr<Shared> shared = session->shared;
    auto result = std::make_unique<Result>(Result{session->reason, session->error, shared->counters()});
    session.reset();  // closes the dups and the pipes before JS hears of it
    report(*shared, std::move(result));
  }

  const int epoll_;
  const int wake_;
  std::mutex mutex_;
  std::vector<Command> commands_;  // guarded by mutex_
  // Relay thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::map<uint64_t, int64_t> closing_;  // id -> monotonic flush deadline
  std::vector<uint64_t> again_;
  char discarded_[kDiscardChunk];  // never read: MSG_TRUNC leaves it untouched on TCP
};

std::atomic<uint64_t> nextId{kWakeId + 1};

// ---- JS side -------------------------------------------------------------------------------------------------------

const char* reasonName(Reason reason) {
  switch (reason) {
    case Reason::ClientClosed: return "client_closed";
    case Reason::BackendClosed: return "backend_closed";
    case Reason::Cancelled: return "cancelled";
    case Reason::Error: return "error";
  }
  return "error";
}

void setNumber(napi_env env, napi_value object, const char* name, double value) {
  napi_value number;
  napi_create_double(env, value, &number);
  napi_set_named_property(env, object, name, number);
}

void setString(napi_env env, napi_value object, const char* name, const char* value) {
  napi_value string;
  napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &string);
  napi_set_named_property(env, object, name, string);
}

napi_value statsObject(napi_env env, const Counters& c) {
  napi_value object;
  napi_create_object(env, &object);
  setNumber(env, object, "clientToBackend", double(c.bytes[kClient]));
  setNumber(env, object, "backendToClient", double(c.bytes[kBackend]));
  setNumber(env, object, "lastClientReadMs", double(c.lastReadMs[kClient]));
  setNumber(env, object, "lastBackendReadMs", double(c.lastReadMs[kBackend]));
  setNumber(env, object, "pendingToClient", double(c.pending[kBackend]));
  setNumber(env, object, "pendingToBackend", double(c.pending[kClient]));
  return object;
}

// Runs on the JS thread with a session's result; env is null when the environment is going away.
void deliver(napi_env env, napi_value onDone, void*, void* data) {
  std::unique_ptr<Result> result(static_cast<Result*>(data));
  if (env == nullptr) return;
  napi_value object = statsObject(env, result->counters);
  setString(env, object, "reason", reasonName(result->reason));
  if (result->error != 0) {
    const char* name = connectionErrorName(result->error);
    setString(env, object, "error", name != nullptr ? name : strerror(result->error));
  }
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_call_function(env, undefined, onDone, 1, &object, nullptr);
}

// Node finalizes the callback after the relay thread released it, or at environment teardown while the session
// still relays: then the session is cancelled so that its fds do not outlive the environment.
void forget(napi_env, void* data, void*) {
  std::unique_ptr<std::shared_ptr<Shared>> owner(static_cast<std::shared_ptr<Shared>*>(data));
  Shared& shared = **owner;
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.tsfn = nullptr;
  }
  if (!shared.finished.load()) Relay::get()->cancel(shared.id);
}

void deleteOwner(napi_env, void* data, void*) {
  delete static_cast<std::shared_ptr<Shared>*>(data);
}

napi_value throwError(napi_env env, const std::string& message) {
  napi_throw_error(env, nullptr, message.c_str());
  return nullptr;
}

// The session behind a handle made by start(); null with a TypeError thrown for anything else.
Shared* sessionOf(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value handle;
  napi_valuetype type;
  bool tagged = false;
  void* data = nullptr;
  napi_get_cb_info(env, info, &argc, &handle, nullptr, nullptr);
  if (napi_typeof(env, handle, &type) != napi_ok || type != napi_external ||
      napi_check_object_type_tag(env, handle, &kHandleTag, &tagged) != napi_ok || !tagged ||
      napi_get_value_external(env, handle, &data) != napi_ok) {
    napi_throw_type_error(env, nullptr, "expected a splice session handle");
    return nullptr;
  }
  return static_cast<std::shared_ptr<Shared>*>(data)->get();
}

// start(clientFd, backendFd, onDone(result)) -> handle. Dups the fds: the caller keeps its own.
napi_value Start(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  int32_t fds[2];
  napi_valuetype type = napi_undefined;
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  if (argc < 3 || napi_get_value_int32(env, args[0], &fds[0]) != napi_ok ||
      napi_get_value_int32(env, args[1], &fds[1]) != napi_ok || napi_typeof(env, args[2], &type) != napi_ok ||
      type != napi_function) {
    napi_throw_type_error(env, nullptr, "expected (clientFd, backendFd, onDone)");
    return nullptr;
  }
  Relay* relay = Relay::get();
  if (relay == nullptr) return throwError(env, "the splice relay thread could not start");
  std::string error;
  std::unique_ptr<Session> session = openSession(fds[0], fds[1], error);
  if (!session) return throwError(env, error);
  std::shared_ptr<Shared> shared = session->shared;
  shared->id = nextId.fetch_add(1);

  napi_value handle;
  auto* owner = new std::shared_ptr<Shared>(shared);
  if (napi_create_external(env, owner, deleteOwner, nullptr, &handle) != napi_ok) {
    delete owner;
    return throwError(env, "cannot create a session handle");
  }
  napi_type_tag_object(env, handle, &kHandleTag);

  napi_value name;
  napi_create_string_utf8(env, "portal_splice", NAPI_AUTO_LENGTH, &name);
  auto* finalizeOwner = new std::shared_ptr<Shared>(shared);
  if (napi_create_threadsafe_function(env, args[2], nullptr, name, 0, 1, finalizeOwner, forget, nullptr, deliver,
                                      &shared->tsfn) != napi_ok) {
    delete finalizeOwner;
    return throwError(env, "cannot create the completion callback");
  }
  relay->add(std::move(session));
  return handle;
}

// stats(handle) -> counters, read without stopping the relay.
napi_value Stats(napi_env env, napi_callback_info info) {
  Shared* shared = sessionOf(env, info);
  return shared == nullptr ? nullptr : statsObject(env, shared->counters());
}

// cancel(handle): idempotent; completion still arrives through onDone.
napi_value Cancel(napi_env env, napi_callback_info info) {
  Shared* shared = sessionOf(env, info);
  if (shared != nullptr && !shared->finished.load()) Relay::get()->cancel(shared->id);
  return nullptr;
}

// ---- TCP keepalive -------------------------------------------------------------------------------------------------

// `value` as an integer in [min, INT_MAX]; false when it is not one (the caller throws).
bool intArgument(napi_env env, napi_value value, int min, int& out) {
  double number;
  if (napi_get_value_double(env, value, &number) != napi_ok || !std::isfinite(number) || number != std::trunc(number) ||
      number < min || number > INT_MAX)
    return false;
  out = int(number);
  return true;
}

// Parses `count` integer arguments, the first an fd (>= 0), the others >= 1; throws a TypeError when they are not.
bool intArguments(napi_env env, napi_callback_info info, size_t count, int* out, const char* usage) {
  napi_value args[4];
  size_t argc = 4;
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  bool valid = argc >= count;
  for (size_t i = 0; valid && i < count; ++i) valid = intArgument(env, args[i], i == 0 ? 0 : 1, out[i]);
  if (!valid) napi_throw_type_error(env, nullptr, usage);
  return valid;
}

// An Error whose code is the errno name, as Node's own errors have.
napi_value throwErrno(napi_env env, const char* call, int error) {
  const char* name = errnoName(error);
  std::string code = name != nullptr ? name : "errno " + std::to_string(error);
  std::string message = std::string(call) + ": " + code + " (" + strerror(error) + ")";
  napi_throw_error(env, code.c_str(), message.c_str());
  return nullptr;
}

// setKeepAlive(fd, idleSeconds, intervalSeconds, count): SO_KEEPALIVE on, with TCP_KEEPIDLE, TCP_KEEPINTVL and
// TCP_KEEPCNT, none of which Node sets but the idle time.
napi_value SetKeepAlive(napi_env env, napi_callback_info info) {
  int v[4];
  if (!intArguments(env, info, 4, v, "expected (fd, idleSeconds, intervalSeconds, count), positive integers"))
    return nullptr;
  const int one = 1;
  const std::pair<int, int> options[] = {{SOL_SOCKET, SO_KEEPALIVE}, {IPPROTO_TCP, TCP_KEEPIDLE},
                                         {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT}};
  const int* values[] = {&one, &v[1], &v[2], &v[3]};
  for (size_t i = 0; i < 4; ++i)
    if (setsockopt(v[0], options[i].first, options[i].second, values[i], sizeof(int)) != 0)
      return throwErrno(env, "setKeepAlive", errno);
  return nullptr;
}

// getKeepAliveDiagnostic(fd) -> { enabled, idle, interval, count }: what the kernel holds, for tests and diagnostics.
napi_value GetKeepAliveDiagnostic(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  const std::pair<int, int> options[] = {{SOL_SOCKET, SO_KEEPALIVE}, {IPPROTO_TCP, TCP_KEEPIDLE},
                                         {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT}};
  int values[4];
  for (size_t i = 0; i < 4; ++i) {
    socklen_t length = sizeof(int);
    if (getsockopt(fd, options[i].first, options[i].second, &values[i], &length) != 0)
      return throwErrno(env, "getKeepAliveDiagnostic", errno);
  }
  napi_value object, enabled;
  napi_create_object(env, &object);
  napi_get_boolean(env, values[0] != 0, &enabled);
  napi_set_named_property(env, object, "enabled", enabled);
  setNumber(env, object, "idle", values[1]);
  setNumber(env, object, "interval", values[2]);
  setNumber(env, object, "count", values[3]);
  return object;
}

}  // namespace

NAPI_MODULE_INIT() {
  napi_property_descriptor properties[] = {
      {"start", nullptr, Start, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"stats", nullptr, Stats, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cancel", nullptr, Cancel, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setKeepAlive", nullptr, SetKeepAlive, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"getKeepAliveDiagnostic", nullptr, GetKeepAliveDiagnostic, nullptr, nullptr, nullptr, napi_enumerable,
       nullptr},
  };
  napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties);
  return exports;
}
