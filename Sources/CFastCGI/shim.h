#ifndef CFASTCGI_SHIM_H
#define CFASTCGI_SHIM_H
#include <fcgiapp.h>
#include <signal.h>
#include <sys/socket.h>
#endif
