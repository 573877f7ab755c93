-- wrk script: POSTs the JSON body in $LOAD_BODY_FILE to the given path, counts responses
-- by status, and counts 503s that lack a Retry-After header. Prints one JSON line at the
-- end with the counts and latency percentiles (microseconds).
local body_file = os.getenv("LOAD_BODY_FILE")
local f = assert(io.open(body_file, "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
  missing_retry_after = 0
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if status == 503 and headers["Retry-After"] == nil and headers["retry-after"] == nil then
    missing_retry_after = missing_retry_after + 1
  end
end

function done(summary, latency, requests)
  local total = {}
  local missing = 0
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    for status, n in pairs(c) do
      total[status] = (total[status] or 0) + n
    end
    missing = missing + t:get("missing_retry_after")
  end
  local parts = {}
  for status, n in pairs(total) do
    table.insert(parts, string.format('"%d":%d', status, n))
  end
  io.write(string.format(
    '{"requests":%d,"seconds":%.3f,"p50_us":%d,"p99_us":%d,"max_us":%d,"socket_errors":%d,"timeouts":%d,"missing_retry_after":%d,"status":{%s}}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99), latency.max,
    summary.errors.connect + summary.errors.read + summary.errors.write, summary.errors.timeout,
    missing, table.concat(parts, ",")))
end
