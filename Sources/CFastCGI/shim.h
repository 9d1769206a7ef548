#ifndef CFASTCGI_SHIM_H
#define CFASTCGI_SHIM_H
#include <fcgiapp.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>

/// True when `sig` is set to be ignored (`nohup` does that for SIGHUP). SIG_IGN is a cast
/// constant, which Swift cannot compare a handler with.
static inline int cfastcgi_signal_is_ignored(int sig) {
    struct sigaction current;
    return sigaction(sig, NULL, &current) == 0 && current.sa_handler == SIG_IGN;
}

/// prctl is variadic, which Swift cannot call: ask for `sig` when the parent process dies.
static inline int cfastcgi_set_parent_death_signal(int sig) { return prctl(PR_SET_PDEATHSIG, (unsigned long)sig); }
#endif
