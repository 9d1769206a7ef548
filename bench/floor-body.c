/* The floor of the FastCGI path with a body of the gateway's size: c-hello's do-nothing libfcgi
 * responder (../shared/bench/peers/c-hello/hello.c), answering FLOOR_BODY_BYTES (default 1700)
 * bytes of JSON instead of 15. Not a target: it shows how much of the gap between the floor and
 * cached weather is the response's size, which nginx, the kernel and wrk pay for per byte.
 * Build: cc -O2 -o floor-body floor-body.c -lfcgi    Run: spawn-fcgi -s SOCK -F N -- ./floor-body */
#include <fcgiapp.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    const char *env = getenv("FLOOR_BODY_BYTES");
    int n = env ? atoi(env) : 1700;
    if (n < 16) n = 16;
    char *body = malloc(n + 1);
    memset(body, 'x', n);
    memcpy(body, "{\"status\":\"", 11);
    memcpy(body + n - 2, "\"}", 2);
    body[n] = 0;
    FCGX_Request req;
    FCGX_Init();
    FCGX_InitRequest(&req, 0, 0);
    while (FCGX_Accept_r(&req) >= 0) {
        FCGX_FPrintF(req.out, "Status: 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: %d\r\n\r\n", n);
        FCGX_PutStr(body, n, req.out);
        FCGX_Finish_r(&req);
    }
    return 0;
}
