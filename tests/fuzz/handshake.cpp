// Fuzz target: the socket handshake's server side (comm/socket.cpp's Acceptor,
// which guards the bootstrap rendezvous and the tcp data links), and the
// address bytes of a unique id. A stranger connects over loopback, sends the
// fuzzer's bytes and closes: it must be dropped (counted and logged) and never
// accepted, since it knows neither the group's secret nor the connection's
// nonce; the listener goes on. The first 64 bytes also go through
// Address::from_bytes, which must give an address or none, never a crash.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "comm/socket/acceptor.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

using namespace hpu::comm;

namespace {

uint64_t g_logged = 0;

struct Listener {
  Address at;
  Acceptor *acceptor;
  Listener() {
    hpu::set_log_callback([](int, const char *, void *) { ++g_logged; }, nullptr);
    Fd l = listen_on(Address::resolve("127.0.0.1", 0, "fuzz listener"), "fuzz listener");
    at = Address::local_of(l.get());
    const uint8_t secret[16] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    acceptor = new Acceptor(std::move(l), secret, Purpose::bootstrap, "fuzz listener");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Listener listener;
  if (size >= 64) {
    Address a = Address::from_bytes(data);
    if (a.valid()) a.str();
  }
  Fd c = connect_retry(listener.at, Clock::now() + std::chrono::seconds(5), nullptr, "fuzz stranger");
  if (size && ::send(c.get(), data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) abort();
  ::shutdown(c.get(), SHUT_WR);
  const uint64_t before = listener.acceptor->dropped(), logged = g_logged;
  Acceptor::Peer peer;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (listener.acceptor->dropped() == before) {
    if (listener.acceptor->poll({}, &peer, 0) == Acceptor::kNewPeer) abort();  // a stranger got in
    if (Clock::now() > give_up) abort();  // not dropped in 10 s: the listener hangs on it
  }
  if (g_logged == logged) abort();  // dropped without a word
  return 0;
}
