-- wrk script for benches/api_mix.sh: a realistic read mix over the
-- population benches/api_mix_population.py writes (bench-000000 ..):
-- 40 % GET /agents/{id}, 20 % GET /agents?capabilities=..., 25 %
-- POST /agents/search (free text, this node only), 15 % POST /resolve.
-- AGENTMESH_BENCH_TOKEN, when set, goes in every request's
-- Authorization header. done() prints the percentiles wrk's own report
-- lacks (p99.9) in one line the script parses.

local agents = tonumber(os.getenv("AGENTMESH_BENCH_AGENTS") or "100000")
local token = os.getenv("AGENTMESH_BENCH_TOKEN")
local capabilities = {"translation", "summarization", "search", "scheduling", "billing",
  "code_review", "legal_review", "data_analysis", "weather", "travel_booking"}
local queries = {"summarize legal contracts", "translate invoices", "weather reports",
  "book flights for travel teams", "review code", "analyse finance reports",
  "customer support tickets", "detect fraud in claims"}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("seed", thread_count)
end

function init(args)
  math.randomseed(os.time() + (seed or 0) * 7919)
end

local function headers(json)
  local h = {}
  if token and token ~= "" then
    h["Authorization"] = "Bearer " .. token
  end
  if json then
    h["Content-Type"] = "application/json"
  end
  return h
end

function request()
  local r = math.random(100)
  if r <= 40 then
    local i = math.random(0, agents - 1)
    return wrk.format("GET", string.format("/agents/bench-%06d", i), headers(false))
  elseif r <= 60 then
    local c = capabilities[math.random(#capabilities)]
    return wrk.format("GET", "/agents?limit=10&capabilities=" .. c, headers(false))
  elseif r <= 85 then
    local q = queries[math.random(#queries)]
    local body = string.format('{"query":"%s","top":10,"scope":"local"}', q)
    return wrk.format("POST", "/agents/search", headers(true), body)
  else
    local q = queries[math.random(#queries)]
    local body = string.format('{"intent":"%s","top":5,"scope":"local"}', q)
    return wrk.format("POST", "/resolve", headers(true), body)
  end
end

function done(summary, latency, requests)
  io.write(string.format("MIX requests=%d errors_connect=%d errors_read=%d errors_write=%d "
    .. "errors_status=%d errors_timeout=%d p50_us=%d p99_us=%d p999_us=%d\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
