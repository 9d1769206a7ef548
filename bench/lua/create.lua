-- POST /v1/weather/session with a fresh random installationId per request.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  bench_seed()
end

function request()
  return wrk.format(nil, nil, nil, create_body())
end
