-- A simulated day of ECON_USERS users around Shanghai, compressed into one short run. Run with
-- one connection per thread (-c equal to -t): each thread then sends its requests one after the
-- other, so every response belongs to the request just sent.
-- User u (thread u mod BENCH_THREADS) lives at a random point within ECON_RADIUS_KM (30) of
-- 31.23,121.47; first every user of the thread creates a session, then the users' 3-5 weather
-- requests for their own point (a few metres of GPS jitter each time; `days` 1, 3, 7 or 15, as
-- an app's today, three-day, week and fortnight screens ask) and one trip request
-- (one of ten cities, 2-6 days starting 7-60 days ahead) are sent in a shuffled order.
-- Each thread writes, when done, ECON_OUT.<id>.keys (one "cell|kind" line per request, cell as
-- grid indices on the 0.05 grid) and ECON_OUT.<id>.done (its counts), then stops.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

local GRID = 0.05
local DAYS = { 1, 3, 7, 15 }
local CITIES = {
  {39.9042, 116.4074}, {30.2741, 120.1551}, {31.2990, 120.5853}, {32.0603, 118.7969}, {24.4798, 118.0894},
  {18.2528, 109.5120}, {30.5728, 104.0668}, {35.6762, 139.6503}, {22.3193, 114.1694}, {36.0671, 120.3826},
}

local users, events, token = {}, {}, {}
local phase, pos, pending, last = 1, 0, nil, nil
local counts = { create_ok = 0, weather_ok = 0, trip_ok = 0, errors = 0, hit = 0, miss = 0, stale = 0, resent = 0 }
local statuses = {}
local keys, out, finished = {}, nil, false

local function coord(v) return tonumber(string.format("%.4f", v)) end
local function cell(lat, lon) return math.floor(lat / GRID + 0.5) .. "," .. math.floor(lon / GRID + 0.5) end

function init(args)
  bench_seed()
  local n = tonumber(os.getenv("BENCH_THREADS") or "1")
  local total = tonumber(os.getenv("ECON_USERS") or "1000")
  local radius = tonumber(os.getenv("ECON_RADIUS_KM") or "30")
  out = os.getenv("ECON_OUT") .. "." .. id
  local clat, clon = 31.23, 121.47
  for u = id, total - 1, n do
    local r, t = radius * math.sqrt(math.random()), 2 * math.pi * math.random()
    local lat = clat + (r * math.cos(t)) / 111.32
    local lon = clon + (r * math.sin(t)) / (111.32 * math.cos(math.rad(clat)))
    users[#users + 1] = u
    for _ = 1, math.random(3, 5) do
      events[#events + 1] = { u = u, kind = "weather", lat = coord(lat + (math.random() - 0.5) * 0.0004),
                              lon = coord(lon + (math.random() - 0.5) * 0.0004), days = DAYS[math.random(#DAYS)] }
    end
    local c = CITIES[math.random(#CITIES)]
    local start = os.time() + 86400 * math.random(7, 60)
    events[#events + 1] = { u = u, kind = "trip", lat = c[1], lon = c[2],
                            s = os.date("!%Y-%m-%d", start), e = os.date("!%Y-%m-%d", start + 86400 * math.random(1, 5)) }
  end
  for i = #events, 2, -1 do
    local j = math.random(i)
    events[i], events[j] = events[j], events[i]
  end
end

local function finish()
  if finished then return end
  finished = true
  local f = io.open(out .. ".keys", "w")
  for _, k in ipairs(keys) do f:write(k, "\n") end
  f:close()
  f = io.open(out .. ".done", "w")
  local st = {}
  for code, n in pairs(statuses) do st[#st + 1] = "status_" .. code .. "=" .. n end
  f:write(string.format("users=%d requests=%d create_ok=%d weather_ok=%d trip_ok=%d errors=%d hit=%d miss=%d stale=%d resent=%d %s\n",
    #users, #users + #events, counts.create_ok, counts.weather_ok, counts.trip_ok, counts.errors,
    counts.hit, counts.miss, counts.stale, counts.resent, table.concat(st, " ")))
  f:close()
  note = "done: " .. (#users + #events) .. " requests"
  wrk.thread:stop()
end

function request()
  if id == nil then return wrk.format("GET", "/v1/health", {}) end  -- wrk's main-state check
  -- One connection per thread: a request() while the previous one has had no response means
  -- wrk dropped it unsent (it regenerates a request after some failed writes); send it again.
  if pending ~= nil and last ~= nil then
    counts.resent = counts.resent + 1
    return last
  end
  last = next_request()
  return last
end

function next_request()
  pos = pos + 1
  if phase == 1 and pos > #users then phase, pos = 2, 1 end
  if phase == 1 then
    pending = { kind = "create", u = users[pos] }
    return wrk.format("POST", "/v1/weather/session", { ["Content-Type"] = "application/json" }, create_body())
  end
  local e = events[pos]
  if e == nil then
    finish()
    pending = nil
    return wrk.format("GET", "/v1/health", {})
  end
  pending = e
  local path
  if e.kind == "weather" then
    path = string.format("/v1/weather?lat=%.4f&lon=%.4f&days=%d", e.lat, e.lon, e.days)
    keys[#keys + 1] = cell(e.lat, e.lon) .. "|forecast"
  else
    path = string.format("/v1/weather/trip?lat=%.4f&lon=%.4f&start=%s&end=%s", e.lat, e.lon, e.s, e.e)
    keys[#keys + 1] = cell(e.lat, e.lon) .. "|trip:" .. e.s .. ":" .. e.e
  end
  return wrk.format("GET", path, { ["X-Weather-Session-Token"] = token[e.u] or "wta_missing" })
end

function response(status, headers, body)
  local p = pending
  pending = nil
  if p == nil then return end
  if status ~= 200 and status ~= 201 then
    counts.errors = counts.errors + 1
    statuses[status] = (statuses[status] or 0) + 1
    return
  end
  if p.kind == "create" then
    token[p.u] = json_field(body, "weatherAccessToken")
    counts.create_ok = counts.create_ok + 1
    return
  end
  counts[p.kind .. "_ok"] = counts[p.kind .. "_ok"] + 1
  local c = json_field(body, "cache")
  if c and counts[c] then counts[c] = counts[c] + 1 end
end
