// portal_splice: relays bytes between two connected TCP sockets with splice(2) through a kernel pipe per direction,
// so relayed bytes never reach JavaScript. Used by the zero_copy proxy mode (src/services/relay/zeroCopy.ts).
//
// Ownership: the relay borrows both socket fds from Node, which keeps owning them and alone closes them. The relay
// must never touch an fd after Node closed it, since the number may already name another player's connection:
// - JS releases a session (release()) before it destroys either socket; a session that ends on its own reports to
//   JS first, which then destroys both.
// - At environment teardown Node closes every socket before the relay's cleanup hook runs, and the event loop can
//   run in between. Epoll events cannot name a closed fd (closing it removes it from the epoll set), so only the
//   steps that no event drives (sessions past their budget, pipe retries, flush deadlines) could; they first check
//   that both fds are still registered, and abandon the session without another system call otherwise.
// Borrowing rather than duplicating costs an idle session no fd of the relay's own, and a login no dup and close.
//
// Pipes are lent, not owned: most sessions are idle most of the time, and a pipe per direction would cost each of
// them two more fds for nothing. A direction takes an empty pipe from the relay's pool (or a new one) when its source
// has bytes, and gives it back as soon as the pipe is empty again; a pipe its destination cannot drain stays with it,
// and the direction reads nothing more until it drains. The pool keeps a bounded number of idle pipes and closes the
// rest. When no pipe can be had (EMFILE, ENFILE), the direction stops reading until one comes back or a retry timer
// fires, so it neither spins nor loses bytes; an end of stream or an error on it is still noticed.
//
// Each Node environment (the main thread, each worker) has one relay, made with its first session: an epoll set,
// edge-triggered, that the environment's own event loop watches, so the splicing runs on the JS thread between other
// callbacks, with no thread switch and no lock. Completions reach JS from the event loop, never from inside a call
// from JS; each session's onDone waits in a JS array until then.
//
// Closing lingers, so that closing a socket does not reset it: closing a TCP socket with unread input makes Linux
// send RST instead of FIN, and a peer that gets RST may discard bytes it received but has not read yet (a backend's
// final kick message). When one side reaches end of stream, it gets FIN at once and nothing more, its pipe flushes
// into the other side, which then gets FIN too, and what the other side still sends is read and discarded until it
// closes as well or the grace period ends.
//
// setKeepAlive() sets the TCP keepalive parameters Node cannot set (interval, count) on a socket fd, and setNoDelay()
// sets TCP_NODELAY on one; Portal calls both on its listening socket, whose accepted sockets inherit them on Linux.

#include <node_api.h>
#include <uv.h>

#include "cfb8.h"
#include "heapMode.h"

#include <fcntl.h>
#include <malloc.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// How long a closing session keeps flushing its pipes toward a destination that does not read, and reading a side
// that does not close, counted from the first end.
constexpr int64_t kFlushGraceMs = 2000;
constexpr size_t kSpliceMax = 1 << 20;
// Bytes discarded per recv() while lingering; with MSG_TRUNC, TCP does not even copy them.
constexpr size_t kDiscardChunk = 64 * 1024;
constexpr unsigned kSpliceFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
// Bytes not yet sent that a relayed socket queues (TCP_NOTSENT_LOWAT) before splicing into it waits. Unbounded, the
// kernel queues megabytes whenever the destination reads slower than the source writes, and that backlog is then
// transmitted from the softirq that processes the destination's window updates: on the destination's CPU, which
// also runs the destination's receive path for it (measured on a 2-core host whose peers share one core: bulk
// throughput typically 0.8x a copying proxy's, 0.86x to 1.21x with the bound). Bounded, the relay sends as the
// destination asks, on its own thread. It bounds only what waits to be sent, not what is in flight, so it does not cap a distant player's
// throughput; 32 KiB outlasts a relay wake-up at any player's bandwidth.
constexpr int kNotSentLowat = 32 * 1024;
// Rounds of splicing a session gets per wake-up before the others get their turn.
constexpr int kPumpBudget = 32;
// Empty pipes kept for the next burst of any session; more are closed, so an idle proxy does not hoard fds.
constexpr size_t kMaxIdlePipes = 64;
// How often directions that could not get a pipe try again when none came back meanwhile: fds that Node closes are
// not announced to the relay.
constexpr int64_t kPipeRetryMs = 100;
constexpr int kClient = 0;
constexpr int kBackend = 1;
// A socket's epoll data is its session id times two plus its side.
constexpr napi_type_tag kHandleTag = {0x7a8f3c1d2e4b5a69ULL, 0x91c2d3e4f5a6b7c8ULL};

enum class Reason : uint8_t { ClientClosed, BackendClosed, Cancelled, Error };

int64_t clockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void closeFd(int fd) {
  if (fd >= 0) close(fd);
}

// The pipes of every environment's relay, for pipePoolDiagnostic().
std::atomic<uint32_t> idlePipeCount{0};
std::atomic<uint32_t> lentPipeCount{0};
std::atomic<uint64_t> pipeFailureCount{0};

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

// Node-style code of an errno a socket call (options, bind, listen) can fail with; null for others.
const char* errnoName(int error) {
  if (const char* name = connectionErrorName(error)) return name;
  switch (error) {
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
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
  bool closing;  // a side has ended (or the session was cancelled): the flush's own deadline bounds what is left
};

// What the relay does with a side's input.
enum class Input : uint8_t {
  Forward,  // into its pipe
  Discard,  // read and dropped: the other side's peer is gone, but closing with unread input would reset
  Done,     // not read: end of stream, error, or cancelled
};

class Relay;

// Per Node environment (the main thread, each worker): its relay, made with the first session, and the JS callbacks
// of its sessions.
struct Instance {
  // The environment's, the relay's and one per session.
  std::atomic<uint32_t> refs{1};
  napi_env env;
  napi_ref callbacks = nullptr;    // an Array: onDone of each live session, at the session's slot
  napi_async_context async = nullptr;  // what onDone runs under, made with the relay
  std::vector<uint32_t> freeSlots;  // slots below `slots` whose session completed
  uint32_t slots = 0;
  bool gone = false;      // the environment began its teardown
  Relay* relay = nullptr;  // null until the first session, and again once the environment tore it down

  explicit Instance(napi_env e) : env(e) {}
  void retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

// One relayed connection, in a single allocation. The relay holds a reference from start() until it hands the
// session to JS with its completion, the JS handle holds one until it is garbage collected: stats() reads the
// counters at any time, even after the end.
struct Session {
  std::atomic<uint32_t> refs{1};
  uint32_t slot = 0;  // of onDone in the instance's callbacks; JS thread only
  uint64_t id = 0;
  Instance* const instance;  // referenced
  std::atomic<uint64_t> bytes[2]{};
  std::atomic<int64_t> lastReadMs[2]{};
  std::atomic<uint64_t> pending[2]{};
  std::atomic<bool> finished{false};
  std::atomic<bool> closingStarted{false};  // `closing`, for the JS thread's counters

  // The relay's state of the session, read by JS once the completion is handed over.
  Input input[2] = {Input::Forward, Input::Forward};
  bool eof[2] = {false, false};        // by source side: it ended cleanly, so its destination gets FIN once flushed
  bool cantWrite[2] = {false, false};  // by destination side: shut down, failed a write or ended in error
  // By socket side: what epoll last reported and no call has since found untrue. Edge-triggered epoll reports a
  // change once, so a side is tried only after an event and until a call would block: no system call that can only
  // say EAGAIN. Both start false: adding a socket to epoll reports what it is ready for at once.
  bool readable[2] = {false, false};
  bool writable[2] = {false, false};
  bool closing = false;
  bool waitingForPipe = false;  // on the relay's list of sessions with a direction that could not get a pipe
  Reason reason = Reason::Error;
  int error = 0;
  int socket[2] = {-1, -1};               // the client and backend fds, borrowed from Node (never closed here)
  // pipe[source side] = {read end, write end}, lent by the relay while bytes are in flight; -1 when none.
  int pipe[2][2] = {{-1, -1}, {-1, -1}};

  explicit Session(Instance* owner) : instance(owner) { owner->retain(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    closePipes();
    instance->release();
  }

  void retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void closePipes() {
    for (auto& ends : pipe)
      for (int& fd : ends) closeFd(std::exchange(fd, -1));
  }

  Counters counters() const {
    Counters c;
    for (int side : {kClient, kBackend}) {
      c.bytes[side] = bytes[side].load(std::memory_order_relaxed);
      c.lastReadMs[side] = lastReadMs[side].load(std::memory_order_relaxed);
      c.pending[side] = pending[side].load(std::memory_order_relaxed);
    }
    c.closing = closingStarted.load(std::memory_order_relaxed);
    return c;
  }
};

// Drops one reference when it goes out of scope.
struct SessionRef {
  Session* session;
  explicit SessionRef(Session* s) : session(s) {}
  SessionRef(const SessionRef&) = delete;
  SessionRef& operator=(const SessionRef&) = delete;
  ~SessionRef() {
    if (session != nullptr) session->release();
  }
  Session* operator->() const { return session; }
  Session* take() { return std::exchange(session, nullptr); }
};

// Whether `fd` is open and non-blocking (Node's sockets are): a blocking one would stall the event loop. Not being a
// socket shows when epoll refuses it or a splice fails, and ends the session with an error.
bool usableFd(int fd, std::string& error) {
  int flags = fd < 0 ? -1 : fcntl(fd, F_GETFL);
  if (flags < 0) error = "fd " + std::to_string(fd) + " is not open";
  else if ((flags & O_NONBLOCK) == 0) error = "fd " + std::to_string(fd) + " is in blocking mode";
  else return true;
  return false;
}

// Borrows both sockets; false with `error` set. Pipes come later, with bytes.
bool openSession(Session& session, int clientFd, int backendFd, std::string& error) {
  if (clientFd == backendFd) {
    error = "the client and backend fds are the same";
    return false;
  }
  if (!usableFd(clientFd, error) || !usableFd(backendFd, error)) return false;
  session.socket[kClient] = clientFd;
  session.socket[kBackend] = backendFd;
  // Best effort: a kernel without the option (before 3.12) relays as before.
  for (int fd : session.socket) setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &kNotSentLowat, sizeof kNotSentLowat);
  int64_t now = clockMs(CLOCK_REALTIME);
  for (auto& last : session.lastReadMs) last.store(now, std::memory_order_relaxed);
  return true;
}

void deliver(Instance& instance, Session* session);

// The relay of one Node environment. Its epoll set, edge-triggered, holds the sessions' sockets, and the
// environment's event loop watches the epoll fd itself (one uv_poll handle): splicing runs on the JS thread between
// other callbacks, as Node's own socket I/O does, so a login costs no thread switch. A timer serves the flush
// deadlines, the pipe retries and the sessions that used up their budget. The handles keep the event loop alive only
// while a session relays or waits to be reported.
class Relay {
 public:
  // Null with `error` set when the epoll set or the handles cannot be made.
  static Relay* create(napi_env env, Instance* instance, std::string& error) {
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
      error = "cannot get the event loop";
      return nullptr;
    }
    napi_value name;
    napi_async_context async = nullptr;
    if (instance->async == nullptr &&
        (napi_create_string_utf8(env, "portal_splice", NAPI_AUTO_LENGTH, &name) != napi_ok ||
         napi_async_init(env, nullptr, name, &async) != napi_ok)) {
      error = "cannot create the completion context";
      return nullptr;
    }
    if (async != nullptr) instance->async = async;
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) {
      error = std::string("epoll_create1: ") + strerror(errno);
      return nullptr;
    }
    auto* relay = new Relay(instance, epoll);
    if (uv_poll_init(loop, &relay->poll_, epoll) != 0) {
      closeFd(epoll);
      delete relay;
      error = "cannot watch the relay's epoll set";
      return nullptr;
    }
    uv_timer_init(loop, &relay->timer_);
    relay->poll_.data = relay->timer_.data = relay;
    uv_poll_start(&relay->poll_, UV_READABLE, &Relay::onPoll);
    uv_unref(reinterpret_cast<uv_handle_t*>(&relay->poll_));
    uv_unref(reinterpret_cast<uv_handle_t*>(&relay->timer_));
    // Handles must be closed before the loop is; an asynchronous cleanup hook lets the environment wait for it.
    if (napi_add_async_cleanup_hook(env, &Relay::onCleanup, relay, &relay->cleanup_) != napi_ok) relay->cleanup_ = nullptr;
    instance->retain();
    return relay;
  }

  // Adopts a new session (with its reference): the events that adding its sockets reports start it.
  void add(Session* session) {
    adopt(session);
    refresh();
  }

  // Write out what the destinations take right now, then finish; onDone comes from the event loop, not from here.
  void cancel(uint64_t id) {
    stop(id);
    refresh();
  }

  // JS is about to close a socket of the session: no system call touches either fd from here on, and what the
  // pipes hold is dropped. onDone comes from the event loop, with reason "cancelled" unless the session was ending
  // already.
  void release(uint64_t id) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;
    Session& session = *found->second;
    if (!session.closing) {
      session.reason = Reason::Cancelled;
      session.error = 0;
    }
    abandon(id);
    refresh();
  }

 private:
  Relay(Instance* instance, int epoll) : instance_(instance), epoll_(epoll) {}

  static void onPoll(uv_poll_t* handle, int, int) { static_cast<Relay*>(handle->data)->step(); }
  static void onTimer(uv_timer_t* handle) { static_cast<Relay*>(handle->data)->step(); }

  // One pass: the events ready now, the sessions left over from their budget, pipe retries, deadlines, then the
  // completions to JS.
  void step() {
    epoll_event events[256];
    int count = epoll_wait(epoll_, events, 256, 0);
    for (int i = 0; i < count; ++i) ready(events[i].data.u64 >> 1, int(events[i].data.u64 & 1), events[i].events);
    std::vector<uint64_t> again;
    again.swap(again_);
    for (uint64_t id : again) pumpOwned(id);
    retryStarved();
    expire();
    report();
    refresh();
  }

  // Arms the timer for what comes next and holds the event loop open while anything is left to do.
  void refresh() {
    if (shut_) return;
    int timeout = done_.empty() ? timeoutMs() : 0;
    if (timeout < 0) uv_timer_stop(&timer_);
    else uv_timer_start(&timer_, &Relay::onTimer, uint64_t(timeout), 0);
    bool live = !sessions_.empty() || !done_.empty();
    if (live == referenced_) return;
    referenced_ = live;
    for (uv_handle_t* handle : {reinterpret_cast<uv_handle_t*>(&poll_), reinterpret_cast<uv_handle_t*>(&timer_)})
      live ? uv_ref(handle) : uv_unref(handle);
  }

  // Finished sessions, each with the relay's reference, to their onDone. A callback may cancel other sessions, whose
  // completions join the next batch.
  void report() {
    while (!done_.empty()) {
      std::vector<Session*> batch;
      batch.swap(done_);
      for (Session* session : batch) deliver(*instance_, session);
    }
  }

  // Environment teardown: every session ends with no report and its pipes closed; then the handles close.
  static void onCleanup(napi_async_cleanup_hook_handle, void* data) { static_cast<Relay*>(data)->tearDown(); }

  void tearDown() {
    shut_ = true;
    instance_->relay = nullptr;
    for (auto& [id, session] : sessions_) {
      for (auto& ends : session->pipe)
        if (ends[0] >= 0) lentPipeCount.fetch_sub(1, std::memory_order_relaxed);
      session->closePipes();  // its sockets are Node's, closed already
      session->finished.store(true);
      session->release();
    }
    sessions_.clear();
    for (Session* session : done_) session->release();
    done_.clear();
    for (auto [readEnd, writeEnd] : idlePipes_) {
      closeFd(readEnd);
      closeFd(writeEnd);
    }
    idlePipeCount.fetch_sub(uint32_t(idlePipes_.size()), std::memory_order_relaxed);
    idlePipes_.clear();
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), &Relay::onClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &Relay::onClosed);
  }

  static void onClosed(uv_handle_t* handle) {
    auto* relay = static_cast<Relay*>(handle->data);
    if (++relay->closedHandles_ < 2) return;
    if (relay->cleanup_ != nullptr) napi_remove_async_cleanup_hook(relay->cleanup_);
    closeFd(relay->epoll_);
    relay->instance_->release();
    delete relay;
  }

  // 0 while a session has work left from its budget or a direction waits for a pipe that may be there now, else until
  // the nearest flush deadline or pipe retry; -1 for none.
  int timeoutMs() const {
    if (!again_.empty() || (retryNow_ && !starved_.empty())) return 0;
    int64_t next = INT64_MAX;
    for (const auto& [id, deadline] : closing_) next = std::min(next, deadline);
    if (!starved_.empty()) next = std::min(next, nextRetryMs_);
    if (next == INT64_MAX) return -1;
    return int(std::clamp<int64_t>(next - clockMs(CLOCK_MONOTONIC), 0, kFlushGraceMs));
  }

  // Registers both sockets; the events that adding them reports start the session.
  void adopt(Session* adopted) {
    Session& session = *adopted;
    uint64_t id = session.id;
    sessions_.emplace(id, adopted);
    for (int side : {kClient, kBackend}) {
      epoll_event event{};
      event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      event.data.u64 = id << 1 | uint64_t(side);
      if (epoll_ctl(epoll_, EPOLL_CTL_ADD, session.socket[side], &event) != 0) {
        for (Input& input : session.input) input = Input::Done;
        beginClosing(session, Reason::Error, errno, 0);
        return pump(id);
      }
    }
  }

  // An epoll event for one side of a session: note what it is ready for, then move bytes.
  void ready(uint64_t id, int side, uint32_t events) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;  // finished; Node may not have closed its socket yet
    Session& session = *found->second;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) session.readable[side] = true;
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) session.writable[side] = true;
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

  // Source socket -> its pipe, borrowed for the occasion. Returns whether anything changed.
  bool fill(Session& session, int side) {
    if (!session.readable[side]) return false;
    if (session.pipe[side][1] < 0 && !lendPipe(session, side)) return starve(session, side);
    ssize_t n = splice(session.socket[side], nullptr, session.pipe[side][1], nullptr, kSpliceMax, kSpliceFlags);
    if (n > 0) {
      session.pending[side].fetch_add(n, std::memory_order_relaxed);
      session.bytes[side].fetch_add(n, std::memory_order_relaxed);
      session.lastReadMs[side].store(clockMs(CLOCK_REALTIME), std::memory_order_relaxed);
      return true;
    }
    int error = n < 0 ? errno : 0;
    // Nothing came, so an empty pipe goes back at once: the other direction or another session may need it.
    returnPipe(session, side);
    if (error == EAGAIN) {
      // Into an empty pipe, EAGAIN says the socket is empty; into one holding bytes it may say the pipe is full.
      if (session.pending[side].load(std::memory_order_relaxed) == 0) session.readable[side] = false;
      return false;
    }
    if (error == EINTR) return true;
    ended(session, side, error);
    return true;
  }

  // An empty pipe for a direction: from the pool, else a new one. False when none can be had (EMFILE, ENFILE).
  bool lendPipe(Session& session, int side) {
    int* ends = session.pipe[side];
    if (!idlePipes_.empty()) {
      ends[0] = idlePipes_.back().first;
      ends[1] = idlePipes_.back().second;
      idlePipes_.pop_back();
      idlePipeCount.fetch_sub(1, std::memory_order_relaxed);
    } else if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0) {
      ends[0] = ends[1] = -1;
      pipeFailed_ = true;
      pipeFailureCount.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    lentPipeCount.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Takes a direction's pipe back once it is empty: into the pool, or closed when the pool is full.
  void returnPipe(Session& session, int side) {
    int* ends = session.pipe[side];
    if (ends[0] < 0 || session.pending[side].load(std::memory_order_relaxed) != 0) return;
    if (idlePipes_.size() < kMaxIdlePipes) {
      idlePipes_.emplace_back(ends[0], ends[1]);
      idlePipeCount.fetch_add(1, std::memory_order_relaxed);
    } else {
      closeFd(ends[0]);
      closeFd(ends[1]);
    }
    ends[0] = ends[1] = -1;
    lentPipeCount.fetch_sub(1, std::memory_order_relaxed);
    retryNow_ = true;
  }

  // A direction with no pipe to be had. It reads nothing until retryStarved() finds one, but an end of stream or an
  // error needs no pipe: peeking notices them, so the session still ends. Returns whether anything changed.
  bool starve(Session& session, int side) {
    char byte;
    ssize_t n = recv(session.socket[side], &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) return session.readable[side] = false;  // the next input wakes the session up
    if (n == 0 || (n < 0 && errno != EINTR)) {
      ended(session, side, n == 0 ? 0 : errno);
      return true;
    }
    if (!session.waitingForPipe) {
      if (starved_.empty()) {
        nextRetryMs_ = clockMs(CLOCK_MONOTONIC) + kPipeRetryMs;
        retryNow_ = false;
      }
      session.waitingForPipe = true;
      starved_.push_back(session.id);
    }
    return false;
  }

  // Sessions that could not get a pipe try again once one came back or fds were freed, else every kPipeRetryMs. A
  // pass stops at the first that still gets none, and the ones not tried yet go first next time.
  void retryStarved() {
    if (starved_.empty()) return;
    int64_t now = clockMs(CLOCK_MONOTONIC);
    if (!retryNow_ && now < nextRetryMs_) return;
    retryNow_ = false;
    nextRetryMs_ = now + kPipeRetryMs;
    std::deque<uint64_t> waiting;
    waiting.swap(starved_);
    while (!waiting.empty()) {
      uint64_t id = waiting.front();
      waiting.pop_front();
      auto found = sessions_.find(id);
      if (found == sessions_.end()) continue;  // finished meanwhile
      found->second->waitingForPipe = false;
      pipeFailed_ = false;
      pumpOwned(id);
      if (pipeFailed_) break;
    }
    starved_.insert(starved_.begin(), waiting.begin(), waiting.end());
  }

  // Source socket -> nowhere, neither counted nor copied. Returns whether anything changed.
  bool discard(Session& session, int side) {
    if (!session.readable[side]) return false;
    ssize_t n = recv(session.socket[side], discarded_, kDiscardChunk, MSG_TRUNC | MSG_DONTWAIT);
    if (n > 0) return true;
    if (n < 0 && errno == EAGAIN) return session.readable[side] = false;
    if (n < 0 && errno == EINTR) return true;
    ended(session, side, n == 0 ? 0 : errno);
    return true;
  }

  // Pipe -> destination socket. Returns whether anything changed.
  bool drain(Session& session, int side) {
    int destination = 1 - side;
    std::atomic<uint64_t>& pending = session.pending[side];
    size_t length = pending.load(std::memory_order_relaxed);
    if (length == 0 || session.cantWrite[destination] || !session.writable[destination]) return false;
    ssize_t n = splice(session.pipe[side][0], nullptr, session.socket[destination], nullptr, length, kSpliceFlags);
    if (n > 0) {
      pending.fetch_sub(n, std::memory_order_relaxed);
      returnPipe(session, side);  // if that emptied it
      return true;
    }
    if (n < 0 && errno == EAGAIN) return session.writable[destination] = false;
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
      if (session.eof[side] && session.pending[side].load(std::memory_order_relaxed) == 0)
        shutdownWrite(session, 1 - side);
  }

  // The pipes flush and lingering sides are read until the deadline. The first end names the reason, later ones can
  // only shorten the deadline.
  void beginClosing(Session& session, Reason reason, int error, int64_t graceMs) {
    int64_t deadline = clockMs(CLOCK_MONOTONIC) + graceMs;
    uint64_t id = session.id;
    if (session.closing) {
      closing_[id] = std::min(closing_[id], deadline);
      return;
    }
    session.closing = true;
    session.closingStarted.store(true, std::memory_order_relaxed);
    session.reason = reason;
    session.error = error;
    closing_[id] = deadline;
  }

  // Nothing left to read, nothing left to write.
  static bool finished(const Session& session) {
    for (int side : {kClient, kBackend}) {
      if (session.input[side] != Input::Done) return false;
      bool empty = session.pending[side].load(std::memory_order_relaxed) == 0;
      if (!empty && !session.cantWrite[1 - side]) return false;
    }
    return true;
  }

  void expire() {
    int64_t now = clockMs(CLOCK_MONOTONIC);
    std::vector<uint64_t> due;
    for (const auto& [id, deadline] : closing_)
      if (deadline <= now) due.push_back(id);
    for (uint64_t id : due) {
      if (owned(*sessions_.at(id))) finish(id);
      else abandon(id);
    }
  }

  // pump() for a step no epoll event drove: only while both fds are still the session's.
  void pumpOwned(uint64_t id) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;  // finished meanwhile
    if (owned(*found->second)) return pump(id);
    Session& session = *found->second;
    if (!session.closing) {
      session.reason = Reason::Error;
      session.error = EBADF;
    }
    abandon(id);
  }

  // Whether both fds still name the sockets registered for the session. Closing an fd takes it out of the epoll set,
  // and a number reused since names another file, which is not in the set either (no session is started meanwhile:
  // that needs JS, and JS releases a session before it closes its sockets). Re-arming reports nothing new.
  bool owned(const Session& session) {
    for (int side : {kClient, kBackend}) {
      epoll_event event{};
      event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      event.data.u64 = session.id << 1 | uint64_t(side);
      if (epoll_ctl(epoll_, EPOLL_CTL_MOD, session.socket[side], &event) != 0) return false;
    }
    return true;
  }

  // Ends a session without another system call on its sockets, which Node closed or is about to close: pipes that
  // hold bytes close with it. Its epoll registrations go when Node closes the fds; their events name a session that
  // is gone and are ignored.
  void abandon(uint64_t id) {
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;
    Session* session = found->second;
    sessions_.erase(found);
    closing_.erase(id);
    settle(*session);
  }

  void finish(uint64_t id) {
    auto found = sessions_.find(id);
    Session* session = found->second;
    sessions_.erase(found);
    closing_.erase(id);
    // The sockets stay registered here until Node closes them (right after JS hears of the end): their events name a
    // session that is gone and are ignored. Sides still writable (a cancel, the healthy side after an error, an
    // expired deadline) get FIN after what they accepted, rather than whatever closing the socket would send.
    for (int side : {kClient, kBackend}) shutdownWrite(*session, side);
    settle(*session);
  }

  // The end of every session: empty pipes go back to the pool, one still holding bytes that no destination takes
  // closes with the session, and the completion waits for the end of the step: never reported from inside a call
  // from JS.
  void settle(Session& session) {
    for (int side : {kClient, kBackend}) {
      returnPipe(session, side);
      if (session.pipe[side][0] >= 0) lentPipeCount.fetch_sub(1, std::memory_order_relaxed);
    }
    session.closePipes();
    retryNow_ = true;  // its pipes' fds are free for another
    session.finished.store(true);
    done_.push_back(&session);
  }

  Instance* const instance_;  // referenced
  const int epoll_;
  uv_poll_t poll_;
  uv_timer_t timer_;
  napi_async_cleanup_hook_handle cleanup_ = nullptr;
  int closedHandles_ = 0;
  bool referenced_ = false;  // the handles hold the event loop open
  bool shut_ = false;
  std::vector<Session*> done_;  // finished, with the relay's reference, until onDone hears of it
  std::unordered_map<uint64_t, Session*> sessions_;  // each with the relay's reference
  std::map<uint64_t, int64_t> closing_;              // id -> monotonic flush deadline
  std::vector<uint64_t> again_;
  std::vector<std::pair<int, int>> idlePipes_;  // empty pipes, {read end, write end}
  std::deque<uint64_t> starved_;                // sessions with a direction waiting for a pipe; finished ones skipped
  int64_t nextRetryMs_ = 0;                     // monotonic time of the next retry of starved_
  bool retryNow_ = false;                       // a pipe or fds came back since the last retry
  bool pipeFailed_ = false;                     // lendPipe() failed since retryStarved() cleared it
  char discarded_[kDiscardChunk];  // never read: MSG_TRUNC leaves it untouched on TCP
};

uint64_t nextId = 1;  // session ids, in every environment

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

napi_value undefinedValue(napi_env env) {
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

// Takes a session's onDone out of the callbacks and frees its slot; null when there is none (a failed start).
napi_value takeCallback(napi_env env, Instance& instance, uint32_t slot) {
  napi_value callbacks, callback = nullptr;
  if (instance.callbacks == nullptr || napi_get_reference_value(env, instance.callbacks, &callbacks) != napi_ok ||
      callbacks == nullptr)
    return nullptr;
  if (napi_get_element(env, callbacks, slot, &callback) != napi_ok) callback = nullptr;
  napi_set_element(env, callbacks, slot, undefinedValue(env));
  instance.freeSlots.push_back(slot);
  return callback;
}

// Runs from the event loop with a finished session and the relay's reference to it: onDone gets the result, in a
// callback scope of its own, so that the microtasks and ticks it queues run right after it.
void deliver(Instance& instance, Session* finished) {
  SessionRef session(finished);
  if (instance.gone) return;
  napi_env env = instance.env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value callback = takeCallback(env, instance, session->slot);
  napi_valuetype type = napi_undefined;
  if (callback != nullptr && napi_typeof(env, callback, &type) == napi_ok && type == napi_function) {
    napi_value object = statsObject(env, session->counters());
    setString(env, object, "reason", reasonName(session->reason));
    if (session->error != 0) {
      const char* name = connectionErrorName(session->error);
      setString(env, object, "error", name != nullptr ? name : strerror(session->error));
    }
    napi_value global;
    napi_get_global(env, &global);
    if (napi_make_callback(env, instance.async, global, callback, 1, &object, nullptr) != napi_ok) {
      // A throw becomes an uncaught exception, as from any other callback of the event loop.
      napi_value error;
      if (napi_get_and_clear_last_exception(env, &error) == napi_ok) napi_fatal_exception(env, error);
    }
  }
  napi_close_handle_scope(env, scope);
}

// Environment teardown (worker exit, process end): JS hears of nothing more. The relay closes its sessions in its
// own cleanup hook.
void teardown(void* data) {
  auto* instance = static_cast<Instance*>(data);
  instance->gone = true;
  if (instance->callbacks != nullptr) napi_delete_reference(instance->env, std::exchange(instance->callbacks, nullptr));
  if (instance->async != nullptr) napi_async_destroy(instance->env, std::exchange(instance->async, nullptr));
  instance->release();
}

void releaseHandle(napi_env, void* data, void*) { static_cast<Session*>(data)->release(); }

napi_value throwError(napi_env env, const std::string& message) {
  napi_throw_error(env, nullptr, message.c_str());
  return nullptr;
}

// The session behind a handle made by start(); null with a TypeError thrown for anything else.
Session* sessionOfValue(napi_env env, napi_value handle) {
  napi_valuetype type;
  bool tagged = false;
  void* data = nullptr;
  if (napi_typeof(env, handle, &type) != napi_ok || type != napi_external ||
      napi_check_object_type_tag(env, handle, &kHandleTag, &tagged) != napi_ok || !tagged ||
      napi_get_value_external(env, handle, &data) != napi_ok) {
    napi_throw_type_error(env, nullptr, "expected a splice session handle");
    return nullptr;
  }
  return static_cast<Session*>(data);
}

// The session behind the first argument.
Session* sessionOf(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value handle = nullptr;
  napi_get_cb_info(env, info, &argc, &handle, nullptr, nullptr);
  if (argc < 1) {
    napi_throw_type_error(env, nullptr, "expected a splice session handle");
    return nullptr;
  }
  return sessionOfValue(env, handle);
}

// The array of onDone callbacks, made with the first session.
bool ensureCallbacks(napi_env env, Instance& instance) {
  if (instance.callbacks != nullptr) return true;
  napi_value callbacks;
  return napi_create_array(env, &callbacks) == napi_ok &&
         napi_create_reference(env, callbacks, 1, &instance.callbacks) == napi_ok;
}

// start(clientFd, backendFd, onDone(result)) -> handle. Borrows the fds: they stay the caller's, who must not close
// either before onDone, or before release() (see the top of this file).
napi_value Start(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  int32_t fds[2];
  napi_valuetype type = napi_undefined;
  void* data = nullptr;
  napi_get_cb_info(env, info, &argc, args, nullptr, &data);
  if (argc < 3 || napi_get_value_int32(env, args[0], &fds[0]) != napi_ok ||
      napi_get_value_int32(env, args[1], &fds[1]) != napi_ok || napi_typeof(env, args[2], &type) != napi_ok ||
      type != napi_function) {
    napi_throw_type_error(env, nullptr, "expected (clientFd, backendFd, onDone)");
    return nullptr;
  }
  Instance& instance = *static_cast<Instance*>(data);
  if (instance.gone) return throwError(env, "the environment is shutting down");
  if (instance.relay == nullptr) {
    std::string error;
    instance.relay = Relay::create(env, &instance, error);
    if (instance.relay == nullptr) return throwError(env, "the splice relay could not start: " + error);
  }
  // The relay's reference; dropping it closes whatever was opened.
  SessionRef session(new Session(&instance));
  std::string error;
  if (!openSession(*session.session, fds[0], fds[1], error)) return throwError(env, error);
  if (!ensureCallbacks(env, instance)) return throwError(env, "cannot create the completion callbacks");

  uint32_t slot = instance.slots;
  if (!instance.freeSlots.empty()) slot = instance.freeSlots.back();
  napi_value callbacks;
  if (napi_get_reference_value(env, instance.callbacks, &callbacks) != napi_ok ||
      napi_set_element(env, callbacks, slot, args[2]) != napi_ok)
    return throwError(env, "cannot register the completion callback");
  if (slot == instance.slots) ++instance.slots;
  else instance.freeSlots.pop_back();
  session->slot = slot;

  napi_value handle;
  if (napi_create_external(env, session.session, releaseHandle, nullptr, &handle) != napi_ok) {
    takeCallback(env, instance, slot);
    return throwError(env, "cannot create a session handle");
  }
  session->retain();  // the handle's
  if (napi_type_tag_object(env, handle, &kHandleTag) != napi_ok) {
    takeCallback(env, instance, slot);
    session->closePipes();  // the handle keeps the memory until it is collected, not the fds
    return throwError(env, "cannot tag a session handle");
  }

  session->id = nextId++;
  instance.relay->add(session.take());
  return handle;
}

// stats(handle) -> counters, read without stopping the relay.
napi_value Stats(napi_env env, napi_callback_info info) {
  Session* session = sessionOf(env, info);
  return session == nullptr ? nullptr : statsObject(env, session->counters());
}

// statsInto(handle, out): the counters of stats() written into a Float64Array of at least 6 elements, in the order
// clientToBackend, backendToClient, lastClientReadMs, lastBackendReadMs, pendingToClient, pendingToBackend, and, in a
// seventh where there is one, 1 once the session is closing (a side ended: the flush's deadline bounds it). Allocates
// nothing: the relay watchdog reads every session once a second.
napi_value StatsInto(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2];
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  Session* session = argc < 2 ? nullptr : sessionOfValue(env, args[0]);
  if (session == nullptr) {
    if (argc < 2) napi_throw_type_error(env, nullptr, "expected (handle, Float64Array)");
    return nullptr;
  }
  bool isTyped = false;
  napi_typedarray_type kind;
  size_t length = 0;
  void* out = nullptr;
  if (napi_is_typedarray(env, args[1], &isTyped) != napi_ok || !isTyped ||
      napi_get_typedarray_info(env, args[1], &kind, &length, &out, nullptr, nullptr) != napi_ok ||
      kind != napi_float64_array || length < 6) {
    napi_throw_type_error(env, nullptr, "expected a Float64Array of at least 6 elements");
    return nullptr;
  }
  const Counters c = session->counters();
  double* values = static_cast<double*>(out);
  values[0] = double(c.bytes[kClient]);
  values[1] = double(c.bytes[kBackend]);
  values[2] = double(c.lastReadMs[kClient]);
  values[3] = double(c.lastReadMs[kBackend]);
  values[4] = double(c.pending[kBackend]);
  values[5] = double(c.pending[kClient]);
  if (length >= 7) values[6] = c.closing ? 1 : 0;
  return nullptr;
}

// cancel(handle): idempotent; completion still arrives through onDone.
napi_value Cancel(napi_env env, napi_callback_info info) {
  Session* session = sessionOf(env, info);
  if (session != nullptr && !session->finished.load() && session->instance->relay != nullptr)
    session->instance->relay->cancel(session->id);
  return nullptr;
}

// release(handle): the relay lets go of both fds at once, before the caller closes one; idempotent. Completion still
// arrives through onDone.
napi_value Release(napi_env env, napi_callback_info info) {
  Session* session = sessionOf(env, info);
  if (session != nullptr && !session->finished.load() && session->instance->relay != nullptr)
    session->instance->relay->release(session->id);
  return nullptr;
}

// ---- Direct send -----------------------------------------------------------------------------------------------------

// send(fd, bytes, length) -> how many of the first `length` bytes the kernel took (0 when none fit), or -errno. One
// send(2), never blocking, no SIGPIPE. The passthrough relay writes small packets this way when nothing is queued
// on the socket: the same system call libuv would make, without a write request and its callbacks per packet.
napi_value Send(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  int32_t fd = -1;
  uint32_t length = 0;
  bool isTyped = false;
  napi_typedarray_type kind;
  size_t size = 0;
  void* data = nullptr;
  if (argc < 3 || napi_get_value_int32(env, args[0], &fd) != napi_ok || fd < 0 ||
      napi_is_typedarray(env, args[1], &isTyped) != napi_ok || !isTyped ||
      napi_get_typedarray_info(env, args[1], &kind, &size, &data, nullptr, nullptr) != napi_ok ||
      kind != napi_uint8_array || napi_get_value_uint32(env, args[2], &length) != napi_ok || length > size) {
    napi_throw_type_error(env, nullptr, "expected (fd, Uint8Array, length <= its length)");
    return nullptr;
  }
  ssize_t sent;
  do sent = ::send(fd, data, length, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  const double result = sent >= 0 ? double(sent) : (errno == EAGAIN || errno == EWOULDBLOCK) ? 0.0 : -double(errno);
  napi_value value;
  napi_create_double(env, result, &value);
  return value;
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

// setNoDelay(fd): TCP_NODELAY on.
napi_value SetNoDelay(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return throwErrno(env, "setNoDelay", errno);
  return nullptr;
}

// getNotSentLowat(fd) -> bytes: what the kernel holds (0 or UINT_MAX: unlimited), for tests and diagnostics.
napi_value GetNotSentLowat(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  unsigned int value = 0;
  socklen_t length = sizeof value;
  if (getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, &length) != 0) return throwErrno(env, "getNotSentLowat", errno);
  napi_value result;
  napi_create_double(env, static_cast<double>(value), &result);
  return result;
}

// unsentBytes(fd) -> the bytes in the socket's send queue the peer has not acknowledged yet (SIOCOUTQ), or -1. It
// falls as the peer reads, where the socket's writability moves only in steps of a third of its buffer: the relay
// watchdog's measure of a slow reader's progress.
napi_value UnsentBytes(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  int value = 0;
  if (ioctl(fd, SIOCOUTQ, &value) != 0) value = -1;
  napi_value result;
  napi_create_int32(env, value, &result);
  return result;
}

// getKeepAliveDiagnostic(fd) -> { enabled, idle, interval, count, noDelay }: what the kernel holds, for tests and
// diagnostics.
napi_value GetKeepAliveDiagnostic(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  const std::pair<int, int> options[] = {{SOL_SOCKET, SO_KEEPALIVE}, {IPPROTO_TCP, TCP_KEEPIDLE},
                                         {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT},
                                         {IPPROTO_TCP, TCP_NODELAY}};
  int values[5];
  for (size_t i = 0; i < 5; ++i) {
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
  napi_value noDelay;
  napi_get_boolean(env, values[4] != 0, &noDelay);
  napi_set_named_property(env, object, "noDelay", noDelay);
  return object;
}

// pipePoolDiagnostic() -> { idle, busy, failures, maxIdle }: pipes in the relay's pool, pipes lent to directions with
// bytes in flight, pipe2() calls that failed since the process started, and the pool's cap. For tests and diagnostics.
napi_value PipePoolDiagnostic(napi_env env, napi_callback_info) {
  napi_value object;
  napi_create_object(env, &object);
  setNumber(env, object, "idle", idlePipeCount.load(std::memory_order_relaxed));
  setNumber(env, object, "busy", lentPipeCount.load(std::memory_order_relaxed));
  setNumber(env, object, "failures", double(pipeFailureCount.load(std::memory_order_relaxed)));
  setNumber(env, object, "maxIdle", double(kMaxIdlePipes));
  return object;
}

// listenTcp(address, port, backlog, reusePort) -> fd: a listening TCP socket (non-blocking, close-on-exec,
// SO_REUSEADDR like Node's own, SO_REUSEPORT when asked) bound to a numeric IPv4 or IPv6 address, an IPv6 one with
// its zone id if it has one (`fe80::1%eth0`); an IPv6 wildcard also takes IPv4 (as Node's listen does). The caller owns the fd: Node listens on it with listen({ fd }), or
// duplicates it (dupFd) for each worker thread, each closing only its own copy. Throws an Error with the errno name.
napi_value ListenTcp(napi_env env, napi_callback_info info) {
  napi_value args[4];
  size_t argc = 4;
  napi_get_cb_info(env, info, &argc, args, nullptr, nullptr);
  // Room for the zone id too (an interface name is at most IF_NAMESIZE - 1 characters).
  char address[INET6_ADDRSTRLEN + IF_NAMESIZE + 1] = {0};
  size_t length = 0;
  int port = 0, backlog = 0, reusePort = 0;
  if (argc < 4 || napi_get_value_string_utf8(env, args[0], address, sizeof address, &length) != napi_ok ||
      !intArgument(env, args[1], 0, port) || !intArgument(env, args[2], 1, backlog) ||
      !intArgument(env, args[3], 0, reusePort) || port > 65535) {
    napi_throw_type_error(env, nullptr, "expected (address, port, backlog, reusePort)");
    return nullptr;
  }
  sockaddr_storage storage{};
  socklen_t size = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  // libuv's parsers, as Node's own listen: uv_ip6_addr reads a zone id (`%eth0`) into sin6_scope_id, which
  // inet_pton refuses; a link-local bind must name its interface.
  if (uv_ip4_addr(address, port, v4) == 0) {
    size = sizeof(sockaddr_in);
  } else if (uv_ip6_addr(address, port, v6) == 0) {
    family = AF_INET6;
    size = sizeof(sockaddr_in6);
  } else {
    napi_throw_type_error(env, nullptr, "listenTcp: the address must be a numeric IPv4 or IPv6 address");
    return nullptr;
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throwErrno(env, "listenTcp", errno);
  const int one = 1, zero = 0;
  int failed = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (failed == 0 && reusePort != 0) failed = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (failed == 0 && family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr))
    failed = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (failed == 0) failed = bind(fd, reinterpret_cast<sockaddr*>(&storage), size);
  if (failed == 0) failed = listen(fd, backlog);
  if (failed != 0) {
    const int error = errno;
    close(fd);
    return throwErrno(env, "listenTcp", error);
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

// dupFd(fd) -> fd: a close-on-exec duplicate, so that each thread listening on a shared socket closes only its own.
napi_value DupFd(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return throwErrno(env, "dupFd", errno);
  napi_value result;
  napi_create_int32(env, copy, &result);
  return result;
}

// closeFd(fd): closes an fd this addon handed out (listenTcp, dupFd) that no Node handle owns.
napi_value CloseFd(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  if (close(fd) != 0 && errno != EINTR) return throwErrno(env, "closeFd", errno);
  return nullptr;
}

// localPort(fd) -> port: the port a socket is bound to (getsockname), for a listening socket bound to port 0.
napi_value LocalPort(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return throwErrno(env, "localPort", errno);
  const int port = storage.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port)
                                                 : ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  napi_value result;
  napi_create_int32(env, port, &result);
  return result;
}

// getReusePort(fd) -> boolean: whether SO_REUSEPORT is set on a socket, for tests and diagnostics.
napi_value GetReusePort(napi_env env, napi_callback_info info) {
  int fd;
  if (!intArguments(env, info, 1, &fd, "expected (fd), a non-negative integer")) return nullptr;
  int value = 0;
  socklen_t length = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &value, &length) != 0) return throwErrno(env, "getReusePort", errno);
  napi_value result;
  napi_get_boolean(env, value != 0, &result);
  return result;
}

// limitMallocArenas(count) -> boolean: at most `count` glibc malloc arenas from now on (mallopt M_ARENA_MAX), false
// where the C library has no such setting. glibc gives every thread that allocates its own arena by default, each
// growing, padding and fragmenting on its own; with worker threads that was about 2 MiB of RSS per worker.
napi_value LimitMallocArenas(napi_env env, napi_callback_info info) {
  int count;
  if (!intArguments(env, info, 1, &count, "expected (count), a non-negative integer")) return nullptr;
  bool done = false;
#ifdef __GLIBC__
  done = count > 0 && mallopt(M_ARENA_MAX, count) == 1;
#endif
  napi_value result;
  napi_get_boolean(env, done, &result);
  return result;
}

}  // namespace

NAPI_MODULE_INIT() {
  // Registered before the relay's own hook, so it runs after it (hooks run in reverse order), and before the
  // napi_env goes (its own hook came before this one).
  auto* instance = new Instance(env);
  if (napi_add_env_cleanup_hook(env, teardown, instance) != napi_ok) {
    delete instance;
    napi_throw_error(env, nullptr, "portal_splice: cannot register the environment cleanup");
    return nullptr;
  }
  napi_property_descriptor properties[] = {
      {"start", nullptr, Start, nullptr, nullptr, nullptr, napi_enumerable, instance},
      {"stats", nullptr, Stats, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cancel", nullptr, Cancel, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"release", nullptr, Release, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"statsInto", nullptr, StatsInto, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"send", nullptr, Send, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setKeepAlive", nullptr, SetKeepAlive, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setNoDelay", nullptr, SetNoDelay, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"getNotSentLowat", nullptr, GetNotSentLowat, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"unsentBytes", nullptr, UnsentBytes, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"getKeepAliveDiagnostic", nullptr, GetKeepAliveDiagnostic, nullptr, nullptr, nullptr, napi_enumerable,
       nullptr},
      {"pipePoolDiagnostic", nullptr, PipePoolDiagnostic, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"listenTcp", nullptr, ListenTcp, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"dupFd", nullptr, DupFd, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"closeFd", nullptr, CloseFd, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"getReusePort", nullptr, GetReusePort, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"localPort", nullptr, LocalPort, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"limitMallocArenas", nullptr, LimitMallocArenas, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cfb8Init", nullptr, Cfb8Init, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cfb8Encrypt", nullptr, Cfb8Encrypt, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"cfb8Decrypt", nullptr, Cfb8Decrypt, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"memorySaving", nullptr, MemorySaving, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"collectGarbage", nullptr, CollectGarbage, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties);
  return exports;
}
