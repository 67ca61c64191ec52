-- wrk script for benches/http_get.sh: GET /agents/{id} for ids drawn
-- uniformly from the population the script filled (demo-00000 ..),
-- AGENTMESH_BENCH_AGENTS of them. Each wrk thread seeds its own generator.

local agents = tonumber(os.getenv("AGENTMESH_BENCH_AGENTS") or "100000")
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("seed", thread_count)
end

function init(args)
  math.randomseed(os.time() + (seed or 0) * 7919)
end

function request()
  local i = math.random(0, agents - 1)
  return wrk.format("GET", string.format("/agents/demo-%05d", i))
end
