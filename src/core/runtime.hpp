// The library's life: initialisation on the first call, fork rules, shutdown at
// exit and dlclose.
#pragma once

#include "core/config.hpp"

namespace hpu {

// Initialises on first use (config, logging, devices); throws Error on a bad
// configuration, and retries on the next call. Throws HPU_ERROR_INVALID_USAGE in
// a fork() child of an initialised parent.
void ensure_init();

// The configuration read at initialisation (ensure_init() first).
const Config &config();

// Layers register what they do at initialisation and at shutdown from a static
// registrar. Init hooks run by ascending priority (devices 10, autocast 20,
// comm 30, ...) and may throw Error to fail initialisation. Shutdown hooks
// run in the reverse order at exit or dlclose.
void on_init(int priority, void (*hook)(const Config &));
void on_shutdown(int priority, void (*hook)());

// True once the process has begun to exit or unload the library: long waits
// give up so that nothing hangs.
bool shutting_down();

}  // namespace hpu
