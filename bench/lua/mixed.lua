-- A mix of the gateway's requests, for the memory check: cached weather with session tokens
-- (40%) and with the legacy token (20%), session creation (15%), refresh (15%), health (10%).
-- Sessions come from the creations in the mix; each refresh spends one live refresh token and
-- its answer puts the successor back in the pool. Weather points: MIX_POINTS "lat,lon;lat,lon"
-- (all warmed in the cache beforehand). LEGACY_TOKEN: the legacy token.
dofile((os.getenv("BENCH_LUA") or "bench/lua") .. "/common.lua")

local points, pool, access = {}, {}, {}
local legacy, ring = nil, 0

function init(args)
  bench_seed()
  legacy = os.getenv("LEGACY_TOKEN")
  for lat, lon in (os.getenv("MIX_POINTS") or "31.2304,121.4737"):gmatch("([%d%.%-]+),([%d%.%-]+)") do
    points[#points + 1] = "/v1/weather?lat=" .. lat .. "&lon=" .. lon
  end
end

local function weather(header, token)
  return wrk.format("GET", points[math.random(#points)], { [header] = token })
end

local function post(path, body)
  return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, body)
end

function request()
  local r = math.random(100)
  if r <= 40 and #access > 0 then
    return weather("X-Weather-Session-Token", access[math.random(#access)])
  elseif r <= 60 then
    return weather("X-Weather-Token", legacy)
  elseif r <= 75 or (r <= 90 and #pool == 0) then
    return post("/v1/weather/session", create_body())
  elseif r <= 90 then
    local p = table.remove(pool)
    return post("/v1/weather/session/refresh", '{"anonymousSessionId":"' .. p[1] .. '","refreshToken":"' .. p[2] .. '"}')
  else
    return wrk.format("GET", "/v1/health", {})
  end
end

function response(status, headers, body)
  if status ~= 200 and status ~= 201 then return end
  local sid, rt, at = json_field(body, "anonymousSessionId"), json_field(body, "refreshToken"), json_field(body, "weatherAccessToken")
  if sid and rt then
    if #pool < 4096 then pool[#pool + 1] = { sid, rt } end
    ring = ring % 256 + 1
    access[ring] = at
  end
end
