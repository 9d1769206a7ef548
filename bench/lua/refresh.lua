-- POST /v1/weather/session/refresh, each request spending one fresh (sessionId, refreshToken)
-- pair from PAIRS_FILE (one "sessionId refreshToken ..." per line). Line i goes to thread
-- i mod BENCH_THREADS, so no pair is spent twice. A thread that runs out stops and says so in a
-- NOTE line (its figures are then too low: seed more pairs).
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local list, nextp = {}, 1

function init(args)
  local n = tonumber(os.getenv("BENCH_THREADS") or "1")
  local i = 0
  for line in io.lines(os.getenv("PAIRS_FILE")) do
    if i % n == id then
      local sid, rt = line:match("^(%S+) (%S+)")
      if sid then list[#list + 1] = '{"anonymousSessionId":"' .. sid .. '","refreshToken":"' .. rt .. '"}' end
    end
    i = i + 1
  end
end

function request()
  if id == nil then  -- wrk's main state checks the script once: nothing to spend there
    return wrk.format(nil, nil, nil, '{"anonymousSessionId":"aws_check","refreshToken":"wtr_check"}')
  end
  local body = list[nextp]
  nextp = nextp + 1
  if body == nil then
    note = "ran out of refresh pairs after " .. #list .. " requests: figures too low"
    wrk.thread:stop()
    body = '{"anonymousSessionId":"aws_exhausted","refreshToken":"wtr_exhausted"}'
  end
  return wrk.format(nil, nil, nil, body)
end
