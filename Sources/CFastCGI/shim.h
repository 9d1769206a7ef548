#ifndef CFASTCGI_SHIM_H
#define CFASTCGI_SHIM_H
#include <fcgiapp.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>

/// prctl is variadic, which Swift cannot call: ask for `sig` when the parent process dies.
static inline int cfastcgi_set_parent_death_signal(int sig) { return prctl(PR_SET_PDEATHSIG, (unsigned long)sig); }
#endif
