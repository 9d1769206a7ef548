-- Shared by every benchmark script (loaded with dofile): thread numbering, a per-thread random
-- seed, random UUIDs, small JSON field extraction, and the one summary line that bench/lib.sh
-- parses:  BENCH requests=.. duration_us=.. rps=.. p50_us=.. p99_us=.. http_errors=.. socket_errors=..
-- http_errors is wrk's own count of responses with status >= 400 (its "Non-2xx or 3xx" line).
-- A thread may leave a global `note` (text); done() prints it as a NOTE line. A script that counts
-- responses in a global table `statuses` (status -> count) gets them summed over all threads on
-- a STATUSES line:  STATUSES 200=.. 201=.. 503=..

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function bench_seed()
  local f = io.open("/dev/urandom", "rb")
  local b = f:read(6)
  f:close()
  local s = 0
  for i = 1, #b do s = s * 256 + b:byte(i) end
  math.randomseed(s + (id or 0))
  math.random(); math.random()
end

function uuid4()
  local r = math.random
  return string.format("%04x%04x-%04x-4%03x-%x%03x-%04x%04x%04x",
    r(0, 65535), r(0, 65535), r(0, 65535), r(0, 4095), r(8, 11), r(0, 4095),
    r(0, 65535), r(0, 65535), r(0, 65535))
end

function json_field(body, name)
  return body:match('"' .. name .. '"%s*:%s*"([^"]*)"')
end

function create_body()
  return '{"platform":"ios","appVersion":"1.0","installationId":"' .. uuid4() .. '"}'
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d http_errors=%d socket_errors=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, summary.requests / secs,
    math.floor(latency:percentile(50)), math.floor(latency:percentile(99)),
    e.status, e.connect + e.read + e.write + e.timeout, e.connect, e.read, e.write, e.timeout))
  local all, counted = {}, false
  for _, t in ipairs(threads) do
    local n = t:get("note")
    if n then io.write("NOTE thread ", tostring(t:get("id")), ": ", tostring(n), "\n") end
    for code, k in pairs(t:get("statuses") or {}) do
      all[code] = (all[code] or 0) + k
      counted = true
    end
  end
  if counted then
    local parts = {}
    for code, k in pairs(all) do parts[#parts + 1] = code .. "=" .. k end
    table.sort(parts)
    io.write("STATUSES ", table.concat(parts, " "), "\n")
  end
end
