-- wrk script: POST the body in BENCH_BODY_FILE with the Authorization header in BENCH_AUTHORIZATION (if any),
-- with BENCH_IDEMPOTENCY_KEYS set an Idempotency-Key of its own on every request (never a replay), and print one
-- machine-readable summary line when the run ends.
local file = assert(io.open(os.getenv("BENCH_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
local authorization = os.getenv("BENCH_AUTHORIZATION")
if authorization ~= nil and authorization ~= "" then
  wrk.headers["Authorization"] = authorization
end

if os.getenv("BENCH_IDEMPOTENCY_KEYS") == "1" then
  -- A prefix of this run's own (wrk runs one after another against one database) and a counter.
  math.randomseed(os.time())
  local prefix = string.format("bench-%d-%08x-", os.time(), math.random(0, 0x7fffffff))
  local sent = 0
  function request()
    sent = sent + 1
    wrk.headers["Idempotency-Key"] = prefix .. sent
    return wrk.format()
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "non_2xx": %d, "connect_errors": %d, "read_errors": %d, ' ..
    '"write_errors": %d, "timeouts": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max, latency.mean))
end
