-- POST /v1/weather/session with a fresh random installationId per request; with BENCH_SPREAD=1
-- each from its own address too (X-Forwarded-For, which a gateway trusting 127.0.0.1 believes),
-- as in production, where an address creates a session or two, never enough to lease its bucket.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  bench_seed()
end

local spread = os.getenv("BENCH_SPREAD") == "1"

function request()
  if spread then
    wrk.headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.random(0, 255), math.random(0, 255), math.random(1, 254))
  end
  return wrk.format(nil, nil, nil, create_body())
end
