-- Static requests (method, path and headers from the wrk command line): only the summary line.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")
