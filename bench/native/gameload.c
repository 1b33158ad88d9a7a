// The game-shaped load in C: a load generator and an echo backend that add microseconds, not milliseconds, to the
// round trips they time. The Node.js load of the game scenario shares CPU 0 between two event loops with their own
// timers and collections; its direct connection alone shows a p99 of 0.6 to 1.3 ms, as large as the proxy's share it
// is meant to resolve. This load measures the same traffic with that noise taken out. Built by bench/run.mjs with
// the system C compiler; Linux only (epoll, timerfd).
//
//   gameload echo
//     Listens on 127.0.0.1 (a free port), prints {"port":N}. For each connection: reads the handshake and Login
//     Start frames, writes FIRST_BYTES (as bench/backend.mjs does), then sends back every byte it receives. A player
//     named "frame" and five digits gets a real login for the packet modes instead (protocol 769, compression
//     threshold 256): Set Compression and Login Success, Finish Configuration after the Login Acknowledged, and the
//     echo after the client's Finish Configuration.
//   gameload game PORT HOST SESSIONS PERIOD_MS CONCURRENCY [raw|framed|encrypted]
//     Logs SESSIONS sessions in through PORT as player "echo" with server address HOST, at most CONCURRENCY at a
//     time, prints {"ready":N,"errors":E,"firstError":"..."}; then each session sends a 100-byte packet every
//     PERIOD_MS, phases spread evenly, stamped with its send time, and times the echo. `framed` logs in as "frame"
//     and the session's number in five digits (a name of its own: Portal lets one session per player into the packet
//     modes) and follows the login into play (for Portal's offline mode), each packet then a valid frame of the compressed
//     format; `encrypted` does an online-mode login first (RSA, then AES-CFB8 both ways, for client_only), which
//     needs OpenSSL's libcrypto (built with -DWITH_CRYPTO -lcrypto).
//
// Both answer the line "snapshot" on stdin with one JSON line: the echo backend {"open":N}; the generator
// {"open":N,"errors":E,"firstError":"...","rtt":{"count":C,"p50":ms,"p99":ms}} over the echoes since the previous
// snapshot. Both exit when stdin closes.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_CRYPTO
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#endif

#define PACKET_BYTES 100
#define LOGIN_TIMEOUT_S 10
#define MAX_PENDING_OUT (1 << 20)
static const unsigned char FIRST_BYTES[] = {0x03, 0x03, 0x80, 0x02};
// The packet modes' player names: "frame" and five digits.
#define FRAMED_NAME "frame"
#define FRAMED_NAME_LENGTH 10
// Protocol 769 under compression (dataLength 0): Login Success (UUID, the player's name, no properties), Finish
// Configuration, and the serverbound Login Acknowledged / Finish Configuration (both id 3 in 769).
static const unsigned char LOGIN_SUCCESS_HEAD[] = {30, 0x00, 0x02, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
                                                   0x42, 0x42, 0x42, 0x42, 0x42, 0x42, FRAMED_NAME_LENGTH};
static const unsigned char EMPTY_PACKET_3[] = {0x02, 0x00, 0x03};
// A play packet id (serverbound and clientbound in 769) that Portal passes without looking at it.
#define GAME_PACKET_ID 0x1c
static const uint32_t STDIN_TAG = UINT32_MAX, LISTEN_TAG = UINT32_MAX - 1, TIMER_TAG = UINT32_MAX - 2;

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char* what) {
  fprintf(stderr, "gameload: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int epollFd;

static void watch(int fd, uint32_t tag, uint32_t events) {
  struct epoll_event event = {.events = events, .data.u32 = tag};
  if (epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &event) != 0) die("epoll_ctl");
}

static void rewatch(int fd, uint32_t tag, uint32_t events) {
  struct epoll_event event = {.events = events, .data.u32 = tag};
  epoll_ctl(epollFd, EPOLL_CTL_MOD, fd, &event);
}

// Reads stdin lines; returns 1 for each complete "snapshot" line via the callback, -1 at end of input.
static int readCommands(void (*onSnapshot)(void)) {
  static char line[256];
  static size_t used;
  ssize_t n = read(0, line + used, sizeof line - used);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return -1;
  if (n < 0) return 0;
  used += (size_t)n;
  for (char* end; (end = memchr(line, '\n', used)) != NULL;) {
    size_t length = (size_t)(end - line);
    if (length == 8 && memcmp(line, "snapshot", 8) == 0) onSnapshot();
    memmove(line, end + 1, used - length - 1);
    used -= length + 1;
  }
  if (used == sizeof line) used = 0;  // a line that long is no command
  return 0;
}

// ---- the echo backend ----

typedef struct {
  int fd;  // -1 when free
  int loggedIn;
  int framed;  // the player is "frame" and five digits: a packet-mode login
  int frames;  // frames seen before the echo: handshake, Login Start (and for "frame" the two acknowledgements)
  unsigned char name[FRAMED_NAME_LENGTH];
  unsigned char in[1024];
  size_t inUsed;
  unsigned char* out;  // bytes the socket did not take yet
  size_t outUsed, outCap;
} Conn;

static Conn* conns;
static size_t connCount, connCap;
static int echoOpen;

static void echoSnapshot(void) {
  printf("{\"open\":%d}\n", echoOpen);
  fflush(stdout);
}

static void closeConn(uint32_t index) {
  Conn* c = &conns[index];
  close(c->fd);
  c->fd = -1;
  free(c->out);
  c->out = NULL;
  echoOpen--;
}

// Sends what is queued first, then `bytes`; what the socket does not take waits for EPOLLOUT. 0 when the
// connection had to close.
static int sendOrQueue(uint32_t index, const unsigned char* bytes, size_t length) {
  Conn* c = &conns[index];
  if (c->outUsed == 0) {
    while (length > 0) {
      ssize_t n = write(c->fd, bytes, length);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) return 0;
      bytes += n;
      length -= (size_t)n;
    }
  }
  if (length == 0) return 1;
  if (c->outUsed + length > MAX_PENDING_OUT) return 0;
  if (c->outUsed + length > c->outCap) {
    c->outCap = (c->outUsed + length) * 2;
    c->out = realloc(c->out, c->outCap);
    if (c->out == NULL) die("realloc");
  }
  memcpy(c->out + c->outUsed, bytes, length);
  c->outUsed += length;
  rewatch(c->fd, index, EPOLLIN | EPOLLOUT);
  return 1;
}

static int flushQueued(uint32_t index) {
  Conn* c = &conns[index];
  size_t sent = 0;
  while (sent < c->outUsed) {
    ssize_t n = write(c->fd, c->out + sent, c->outUsed - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) return 0;
    sent += (size_t)n;
  }
  memmove(c->out, c->out + sent, c->outUsed - sent);
  c->outUsed -= sent;
  if (c->outUsed == 0) rewatch(c->fd, index, EPOLLIN);
  return 1;
}

// The frames before the relay: a VarInt length, then that many bytes. After the second (Login Start), FIRST_BYTES
// (and for "frame" Login Success, then Finish Configuration after the third); the rest echoed. 0 when the
// connection had to close.
static int login(uint32_t index) {
  Conn* c = &conns[index];
  while (c->frames < (c->framed ? 4 : 2)) {
    uint32_t length = 0;
    size_t at = 0;
    for (;; at++) {
      if (at == c->inUsed) return 1;  // incomplete
      if (at == 3) return 0;          // longer than any login frame
      length |= (uint32_t)(c->in[at] & 0x7f) << (7 * at);
      if ((c->in[at] & 0x80) == 0) break;
    }
    size_t end = at + 1 + length;
    if (end > sizeof c->in) return 0;
    if (end > c->inUsed) return 1;
    // Login Start: packet id 0, then the name.
    if (c->frames == 1 && length >= 2 + FRAMED_NAME_LENGTH && c->in[at + 1] == 0x00 && c->in[at + 2] == FRAMED_NAME_LENGTH &&
        memcmp(c->in + at + 3, FRAMED_NAME, strlen(FRAMED_NAME)) == 0) {
      c->framed = 1;
      memcpy(c->name, c->in + at + 3, FRAMED_NAME_LENGTH);
    }
    memmove(c->in, c->in + end, c->inUsed - end);
    c->inUsed -= end;
    c->frames++;
    if (c->frames == 2) {
      if (!sendOrQueue(index, FIRST_BYTES, sizeof FIRST_BYTES)) return 0;
      if (c->framed) {
        unsigned char success[sizeof LOGIN_SUCCESS_HEAD + FRAMED_NAME_LENGTH + 1];
        memcpy(success, LOGIN_SUCCESS_HEAD, sizeof LOGIN_SUCCESS_HEAD);
        memcpy(success + sizeof LOGIN_SUCCESS_HEAD, c->name, FRAMED_NAME_LENGTH);
        success[sizeof success - 1] = 0;  // no properties
        if (!sendOrQueue(index, success, sizeof success)) return 0;
      }
    } else if (c->frames == 3) {
      if (!sendOrQueue(index, EMPTY_PACKET_3, sizeof EMPTY_PACKET_3)) return 0;
    }
  }
  c->loggedIn = 1;
  int ok = c->inUsed == 0 || sendOrQueue(index, c->in, c->inUsed);
  c->inUsed = 0;
  return ok;
}

static void echoReadable(uint32_t index) {
  static unsigned char buffer[65536];
  Conn* c = &conns[index];
  for (;;) {
    if (!c->loggedIn) {
      ssize_t n = read(c->fd, c->in + c->inUsed, sizeof c->in - c->inUsed);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0 || (c->inUsed += (size_t)n, !login(index))) return closeConn(index);
      continue;
    }
    ssize_t n = read(c->fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0 || !sendOrQueue(index, buffer, (size_t)n)) return closeConn(index);
  }
}

static void echoAccept(int listener) {
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint32_t index = 0;
    while (index < connCount && conns[index].fd >= 0) index++;
    if (index == connCount) {
      if (connCount == connCap) {
        connCap = connCap == 0 ? 1024 : connCap * 2;
        conns = realloc(conns, connCap * sizeof *conns);
        if (conns == NULL) die("realloc");
      }
      connCount++;
    }
    conns[index] = (Conn){.fd = fd};
    echoOpen++;
    watch(fd, index, EPOLLIN);
  }
}

static int runEcho(void) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t size = sizeof address;
  if (listener < 0 || bind(listener, (struct sockaddr*)&address, sizeof address) != 0 || listen(listener, 4096) != 0 ||
      getsockname(listener, (struct sockaddr*)&address, &size) != 0)
    die("listen");
  watch(listener, LISTEN_TAG, EPOLLIN);
  watch(0, STDIN_TAG, EPOLLIN);
  printf("{\"port\":%d}\n", ntohs(address.sin_port));
  fflush(stdout);
  struct epoll_event events[512];
  for (;;) {
    int count = epoll_wait(epollFd, events, 512, -1);
    for (int i = 0; i < count; i++) {
      uint32_t tag = events[i].data.u32;
      if (tag == STDIN_TAG) {
        if (readCommands(echoSnapshot) < 0) return 0;
      } else if (tag == LISTEN_TAG) {
        echoAccept(listener);
      } else if (conns[tag].fd >= 0) {
        if ((events[i].events & EPOLLOUT) && !flushQueued(tag)) closeConn(tag);
        else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) echoReadable(tag);
      }
    }
  }
}

// ---- the load generator ----

enum { CONNECTING, LOGGING_IN, PLAYING, CLOSED };
enum { RAW, FRAMED, ENCRYPTED };
static int flavour = RAW;

typedef struct {
  int fd;
  int state;
  size_t firstSeen;  // bytes of FIRST_BYTES received
  int step;          // framed login: 0 Encryption Request (encrypted only), 1 Set Compression, 2 Login Success, 3 Finish Configuration
  unsigned char in[1024];
  size_t inUsed;
  unsigned char carry[PACKET_BYTES];
  size_t carryUsed;
#ifdef WITH_CRYPTO
  EVP_CIPHER_CTX* encrypt;
  EVP_CIPHER_CTX* decrypt;
#endif
} Session;

static Session* sessions;
static int sessionCount, playing, errors;
static char firstError[160];
static double* samples;
static size_t sampleCount, sampleCap;

static void fail(const char* what, int error) {
  errors++;
  if (firstError[0] == '\0') snprintf(firstError, sizeof firstError, "%s: %s", what, strerror(error));
}

static void endSession(int index, const char* what, int error) {
  Session* s = &sessions[index];
  if (s->state == CLOSED) return;
#ifdef WITH_CRYPTO
  EVP_CIPHER_CTX_free(s->encrypt);
  EVP_CIPHER_CTX_free(s->decrypt);
  s->encrypt = s->decrypt = NULL;
#endif
  if (s->state == PLAYING) playing--;
  s->state = CLOSED;
  close(s->fd);
  fail(what, error);
}

static int compareDoubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void gameSnapshot(void) {
  qsort(samples, sampleCount, sizeof *samples, compareDoubles);
  double p50 = sampleCount == 0 ? 0 : samples[sampleCount / 2];
  double p99 = sampleCount == 0 ? 0 : samples[(size_t)(sampleCount * 0.99)];
  for (char* c = firstError; *c != '\0'; c++)
    if (*c == '"' || *c == '\\') *c = '\'';
  printf("{\"open\":%d,\"errors\":%d,\"firstError\":\"%s\",\"rtt\":{\"count\":%zu,\"p50\":%.6f,\"p99\":%.6f}}\n", playing,
         errors, firstError, sampleCount, p50, p99);
  fflush(stdout);
  sampleCount = 0;
}

static void record(double ms) {
  if (sampleCount == sampleCap) {
    sampleCap = sampleCap == 0 ? 1 << 16 : sampleCap * 2;
    samples = realloc(samples, sampleCap * sizeof *samples);
    if (samples == NULL) die("realloc");
  }
  samples[sampleCount++] = ms;
}

static size_t varInt(unsigned char* out, uint32_t value) {
  size_t n = 0;
  do {
    unsigned char low = value & 0x7f;
    value >>= 7;
    out[n++] = value != 0 ? low | 0x80 : low;
  } while (value != 0);
  return n;
}

// Handshake (protocol 769, next state login) and Login Start (name "echo", or "frame00000" for the packet modes, a
// UUID), as bench/wire.mjs writes them; `*digitsAt` is where the five digits are (0 for "echo").
static size_t loginBytes(unsigned char* out, const char* host, int port, size_t* digitsAt) {
  unsigned char body[300];
  size_t hostLength = strlen(host), b = 0, n = 0;
  b += varInt(body + b, 0x00);
  b += varInt(body + b, 769);
  b += varInt(body + b, (uint32_t)hostLength);
  memcpy(body + b, host, hostLength);
  b += hostLength;
  body[b++] = (unsigned char)(port >> 8);
  body[b++] = (unsigned char)port;
  b += varInt(body + b, 2);
  n += varInt(out + n, (uint32_t)b);
  memcpy(out + n, body, b);
  n += b;
  b = 0;
  b += varInt(body + b, 0x00);
  const char* name = flavour == RAW ? "echo" : FRAMED_NAME "00000";
  b += varInt(body + b, (uint32_t)strlen(name));
  memcpy(body + b, name, strlen(name));
  b += strlen(name);
  // The name's digits sit at the same place in the frame: after its length prefix (one byte for a body this short).
  *digitsAt = flavour == RAW ? 0 : n + 1 + b - 5;
  memset(body + b, 0x42, 16);
  b += 16;
  n += varInt(out + n, (uint32_t)b);
  memcpy(out + n, body, b);
  return n + b;
}

// Players come from many addresses: session i leaves from 127.1.x.y, as the Node.js generator's do.
static int connectSession(int index, int port) {
  Session* s = &sessions[index];
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->fd < 0) {
    s->state = CLOSED;
    fail("socket", errno);
    return 0;
  }
  int one = 1, source = index % (254 * 254);
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f010000u | (uint32_t)(source / 254 + 1) << 8 | (uint32_t)(source % 254 + 1))};
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(s->fd, (struct sockaddr*)&from, sizeof from) != 0 || (connect(s->fd, (struct sockaddr*)&to, sizeof to) != 0 && errno != EINPROGRESS)) {
    int error = errno;
    close(s->fd);
    s->state = CLOSED;
    fail("connect", error);
    return 0;
  }
  s->state = CONNECTING;
  watch(s->fd, (uint32_t)index, EPOLLOUT | EPOLLIN);
  return 1;
}

// Bytes to a session's socket, encrypted once the online login turned encryption on. 1 when all were taken.
static int sendSession(Session* s, const unsigned char* bytes, size_t length) {
  unsigned char out[256];
  if (length > sizeof out) return 0;
#ifdef WITH_CRYPTO
  if (s->encrypt != NULL) {
    int produced = 0;
    EVP_EncryptUpdate(s->encrypt, out, &produced, bytes, (int)length);
    bytes = out;
  }
#endif
  return write(s->fd, bytes, length) == (ssize_t)length;
}

#ifdef WITH_CRYPTO
// Answers an Encryption Request (the frame's packet data): a fresh secret and the token, both RSA-encrypted with
// the proxy's key; then AES-128-CFB8 both ways. 0 on failure.
static int answerEncryption(Session* s, const unsigned char* data, size_t length) {
  size_t at = 1;  // packet id 0x01
  uint32_t fields[3][2];  // offset and length of serverId, public key, verify token
  for (int f = 0; f < 3; f++) {
    uint32_t value = 0;
    for (int i = 0;; i++) {
      if (at >= length || i == 3) return 0;
      value |= (uint32_t)(data[at] & 0x7f) << (7 * i);
      if ((data[at++] & 0x80) == 0) break;
    }
    if (at + value > length) return 0;
    fields[f][0] = (uint32_t)at;
    fields[f][1] = value;
    at += value;
  }
  unsigned char secret[16];
  RAND_bytes(secret, sizeof secret);
  const unsigned char* key = data + fields[1][0];
  EVP_PKEY* pkey = d2i_PUBKEY(NULL, &key, fields[1][1]);
  if (pkey == NULL) return 0;
  unsigned char encSecret[256], encToken[256];
  size_t secretLength = sizeof encSecret, tokenLength = sizeof encToken;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(pkey, NULL);
  int ok = ctx != NULL && EVP_PKEY_encrypt_init(ctx) > 0 && EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) > 0 &&
           EVP_PKEY_encrypt(ctx, encSecret, &secretLength, secret, sizeof secret) > 0 &&
           EVP_PKEY_encrypt(ctx, encToken, &tokenLength, data + fields[2][0], fields[2][1]) > 0;
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  if (!ok || secretLength > 127 + 128 || tokenLength > 255) return 0;
  unsigned char response[600];
  size_t n = 0, body = 1 + varInt(response, (uint32_t)secretLength) + secretLength + varInt(response, (uint32_t)tokenLength) + tokenLength;
  n += varInt(response + n, (uint32_t)body);
  response[n++] = 0x01;
  n += varInt(response + n, (uint32_t)secretLength);
  memcpy(response + n, encSecret, secretLength);
  n += secretLength;
  n += varInt(response + n, (uint32_t)tokenLength);
  memcpy(response + n, encToken, tokenLength);
  n += tokenLength;
  if (write(s->fd, response, n) != (ssize_t)n) return 0;
  s->encrypt = EVP_CIPHER_CTX_new();
  s->decrypt = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(s->encrypt, EVP_aes_128_cfb8(), NULL, secret, secret);
  EVP_DecryptInit_ex(s->decrypt, EVP_aes_128_cfb8(), NULL, secret, secret);
  return 1;
}
#endif

// The packet-mode login, frame by frame: (Encryption Request,) Set Compression, Login Success -> Login
// Acknowledged, Finish Configuration -> its acknowledgement, then play. 1 once it left the login.
static int advanceFramedLogin(int index) {
  Session* s = &sessions[index];
  ssize_t n = read(s->fd, s->in + s->inUsed, sizeof s->in - s->inUsed);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) {
    endSession(index, "login", n == 0 ? ECONNRESET : errno);
    return 1;
  }
#ifdef WITH_CRYPTO
  if (s->decrypt != NULL) {
    int produced = 0;
    EVP_DecryptUpdate(s->decrypt, s->in + s->inUsed, &produced, s->in + s->inUsed, (int)n);
  }
#endif
  s->inUsed += (size_t)n;
  for (;;) {
    uint32_t length = 0;
    size_t at = 0;
    for (;; at++) {
      if (at == s->inUsed) return 0;
      if (at == 3) {
        endSession(index, "login frame", EPROTO);
        return 1;
      }
      length |= (uint32_t)(s->in[at] & 0x7f) << (7 * at);
      if ((s->in[at] & 0x80) == 0) break;
    }
    size_t end = at + 1 + length;
    if (end > sizeof s->in) {
      endSession(index, "login frame too long", EPROTO);
      return 1;
    }
    if (end > s->inUsed) return 0;
    int ok = 1;
    if (s->step == 0) {
#ifdef WITH_CRYPTO
      ok = length > 0 && s->in[at + 1] == 0x01 && answerEncryption(s, s->in + at + 1, length);
      // What came after the request was read before the decryption was on.
      if (ok && end < s->inUsed) {
        int produced = 0;
        EVP_DecryptUpdate(s->decrypt, s->in + end, &produced, s->in + end, (int)(s->inUsed - end));
      }
#else
      ok = 0;
#endif
    } else if (s->step == 2) {
      ok = sendSession(s, EMPTY_PACKET_3, sizeof EMPTY_PACKET_3);  // Login Acknowledged
    } else if (s->step == 3) {
      ok = sendSession(s, EMPTY_PACKET_3, sizeof EMPTY_PACKET_3);  // Finish Configuration acknowledged
    }
    if (!ok) {
      endSession(index, "login step", EPROTO);
      return 1;
    }
    memmove(s->in, s->in + end, s->inUsed - end);
    s->inUsed -= end;
    if (++s->step == 4) {
      s->state = PLAYING;
      playing++;
      s->inUsed = 0;
      return 1;
    }
  }
}

// Moves a session through its login; 1 once it left the login (playing or closed).
static int advanceLogin(int index, uint32_t events, const unsigned char* hello, size_t helloLength) {
  Session* s = &sessions[index];
  if (s->state == CONNECTING) {
    int error = 0;
    socklen_t size = sizeof error;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      endSession(index, "connect", error != 0 ? error : ECONNRESET);
      return 1;
    }
    if (!(events & EPOLLOUT)) return 0;
    // A login is a few dozen bytes: a fresh socket takes them whole.
    if (write(s->fd, hello, helloLength) != (ssize_t)helloLength) {
      endSession(index, "write", errno);
      return 1;
    }
    s->state = LOGGING_IN;
    s->step = flavour == ENCRYPTED ? 0 : 1;
    rewatch(s->fd, (uint32_t)index, EPOLLIN);
    return 0;
  }
  if (flavour != RAW) return advanceFramedLogin(index);
  unsigned char buffer[64];
  ssize_t n = read(s->fd, buffer, sizeof FIRST_BYTES - s->firstSeen);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) {
    endSession(index, "login", n == 0 ? ECONNRESET : errno);
    return 1;
  }
  s->firstSeen += (size_t)n;
  if (s->firstSeen < sizeof FIRST_BYTES) return 0;
  s->state = PLAYING;
  playing++;
  return 1;
}

// Reads what arrived; an echo's round trip ends when the read that completes it returns.
static void gameReadable(int index) {
  Session* s = &sessions[index];
  unsigned char buffer[16 * PACKET_BYTES];
  for (;;) {
    ssize_t n = read(s->fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) return endSession(index, "closed while playing", n == 0 ? ECONNRESET : errno);
    double now = nowMs();
#ifdef WITH_CRYPTO
    if (s->decrypt != NULL) {
      int produced = 0;
      EVP_DecryptUpdate(s->decrypt, buffer, &produced, buffer, (int)n);
    }
#endif
    for (ssize_t at = 0; at < n;) {
      size_t take = PACKET_BYTES - s->carryUsed;
      if (take > (size_t)(n - at)) take = (size_t)(n - at);
      memcpy(s->carry + s->carryUsed, buffer + at, take);
      s->carryUsed += take;
      at += (ssize_t)take;
      if (s->carryUsed == PACKET_BYTES) {
        double sentAt;
        memcpy(&sentAt, s->carry + (flavour == RAW ? 0 : 3), sizeof sentAt);
        record(now - sentAt);
        s->carryUsed = 0;
      }
    }
  }
}

static void armTimer(int timer, double atMs) {
  struct itimerspec spec = {0};
  spec.it_value.tv_sec = (time_t)(atMs / 1e3);
  spec.it_value.tv_nsec = (long)((atMs - spec.it_value.tv_sec * 1e3) * 1e6);
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  timerfd_settime(timer, TFD_TIMER_ABSTIME, &spec, NULL);
}

static int runGame(int port, const char* host, int count, double periodMs, int concurrency) {
  sessions = calloc((size_t)count, sizeof *sessions);
  if (sessions == NULL) die("calloc");
  sessionCount = count;
  unsigned char hello[400];
  size_t digitsAt = 0;
  size_t helloLength = loginBytes(hello, host, port, &digitsAt);
  // Five digits name 100,000 sessions: more would log in twice under one name, which the packet modes refuse.
  if (digitsAt != 0 && count > 100000) {
    fprintf(stderr, "gameload: at most 100000 sessions in the packet modes\n");
    exit(2);
  }
  struct epoll_event events[1024];

  // Logins, at most `concurrency` in progress.
  int started = 0, settled = 0, inProgress = 0;
  double deadline = nowMs() + LOGIN_TIMEOUT_S * 1e3;
  while (settled < count && nowMs() < deadline) {
    while (started < count && inProgress < concurrency) {
      if (connectSession(started++, port)) inProgress++;
      else settled++;
    }
    int n = epoll_wait(epollFd, events, 1024, 100);
    for (int i = 0; i < n; i++) {
      uint32_t tag = events[i].data.u32;
      if (tag == STDIN_TAG || sessions[tag].state == CLOSED || sessions[tag].state == PLAYING) continue;
      if (digitsAt != 0) {
        // Session k logs in as "frame" and k in five digits.
        char digits[6];
        snprintf(digits, sizeof digits, "%05u", tag % 100000u);
        memcpy(hello + digitsAt, digits, 5);
      }
      if (advanceLogin((int)tag, events[i].events, hello, helloLength)) {
        settled++;
        inProgress--;
      }
    }
  }
  for (int i = 0; i < started; i++)
    if (sessions[i].state == CONNECTING || sessions[i].state == LOGGING_IN) endSession(i, "login", ETIMEDOUT);
  printf("{\"ready\":%d,\"errors\":%d,\"firstError\":\"%s\"}\n", playing, errors, firstError);
  fflush(stdout);
  watch(0, STDIN_TAG, EPOLLIN);

  // Play: packet k goes out at start + k * period / count, from session k mod count.
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer < 0) die("timerfd_create");
  watch(timer, TIMER_TAG, EPOLLIN);
  double start = nowMs(), step = periodMs / count;
  uint64_t sent = 0;
  unsigned char packet[PACKET_BYTES];
  memset(packet, 0x33, sizeof packet);
  // In the packet modes each packet is a frame of the compressed format: length 99, dataLength 0, a packet id.
  size_t stampAt = 0;
  if (flavour != RAW) {
    packet[0] = PACKET_BYTES - 1;
    packet[1] = 0x00;
    packet[2] = GAME_PACKET_ID;
    stampAt = 3;
  }
  armTimer(timer, start);
  for (;;) {
    int n = epoll_wait(epollFd, events, 1024, -1);
    for (int i = 0; i < n; i++) {
      uint32_t tag = events[i].data.u32;
      if (tag == STDIN_TAG) {
        if (readCommands(gameSnapshot) < 0) return 0;
      } else if (tag == TIMER_TAG) {
        uint64_t expirations;
        if (read(timer, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("timerfd");
        for (double due = start + sent * step; due <= nowMs(); due = start + (double)++sent * step) {
          Session* s = &sessions[sent % (uint64_t)count];
          if (s->state != PLAYING) continue;
          double stamp = nowMs();
          memcpy(packet + stampAt, &stamp, sizeof stamp);
          // 100 bytes into a socket whose peer echoes them: a short write means the proxy stopped reading.
          if (!sendSession(s, packet, sizeof packet)) endSession((int)(sent % (uint64_t)count), "write", errno != 0 ? errno : EAGAIN);
        }
        armTimer(timer, start + sent * step);
      } else if (sessions[tag].state == PLAYING) {
        gameReadable((int)tag);
      }
    }
  }
}

int main(int argc, char** argv) {
  epollFd = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd < 0) die("epoll_create1");
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  if (argc == 2 && strcmp(argv[1], "echo") == 0) return runEcho();
  if ((argc == 7 || argc == 8) && strcmp(argv[1], "game") == 0) {
    int port = atoi(argv[2]), count = atoi(argv[4]), concurrency = atoi(argv[6]);
    if (argc == 8) flavour = strcmp(argv[7], "framed") == 0 ? FRAMED : strcmp(argv[7], "encrypted") == 0 ? ENCRYPTED : RAW;
#ifndef WITH_CRYPTO
    if (flavour == ENCRYPTED) {
      fprintf(stderr, "gameload: built without OpenSSL: no encrypted logins\n");
      return 2;
    }
#endif
    double period = atof(argv[5]);
    if (port > 0 && port < 65536 && count > 0 && period > 0 && concurrency > 0) return runGame(port, argv[3], count, period, concurrency);
  }
  fprintf(stderr, "usage: gameload echo | gameload game PORT HOST SESSIONS PERIOD_MS CONCURRENCY [raw|framed|encrypted]\n");
  return 2;
}
