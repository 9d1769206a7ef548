-- Creates sessions and writes "sessionId refreshToken accessToken" lines to SEED_FILE.<thread>,
-- for the refresh benchmark. Each thread stops after SEED_PER_THREAD sessions; the harness
-- interrupts wrk once the files hold enough lines.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local out, made, want

function init(args)
  bench_seed()
  want = tonumber(os.getenv("SEED_PER_THREAD") or "1000")
  out = io.open(os.getenv("SEED_FILE") .. "." .. id, "w")
  out:setvbuf("line")
  made = 0
end

function request()
  return wrk.format(nil, nil, nil, create_body())
end

function response(status, headers, body)
  if status == 200 or status == 201 then
    local sid, rt = json_field(body, "anonymousSessionId"), json_field(body, "refreshToken")
    if sid and rt then
      out:write(sid, " ", rt, " ", json_field(body, "weatherAccessToken") or "-", "\n")
      made = made + 1
    end
  end
  if made >= want then
    note = "seeded " .. made
    wrk.thread:stop()
  end
end
