-- Cached weather, each request with the next of many session access tokens (the third column of
-- PAIRS_FILE, at most MANY_TOKENS of them), so token lookups spread over the token index instead
-- of hitting the same few pages again and again.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

local tokens, i = {}, 0
local path = "/v1/weather?lat=31.2304&lon=121.4737"

function init(args)
  local max = tonumber(os.getenv("MANY_TOKENS") or "1000")
  for line in io.lines(os.getenv("PAIRS_FILE")) do
    local at = line:match("^%S+ %S+ (%S+)")
    if at and at ~= "-" then tokens[#tokens + 1] = at end
    if #tokens >= max then break end
  end
  i = (id or 0) * 7919
end

function request()
  if #tokens == 0 then return wrk.format("GET", path, {}) end
  i = i % #tokens + 1
  return wrk.format("GET", path, { ["X-Weather-Session-Token"] = tokens[i] })
end
