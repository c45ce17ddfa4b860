# ruby-redis (Debian's ruby-redis package) against actorkvd: issue #21's scenario set, with the
# client's default settings (Redis.new(path: SOCKET); ruby-redis 4 speaks RESP2).
#
#   ruby ruby_redis_scenarios.rb SOCKET
#
# Prints TAP-like `ok - ...` / `not ok - ...` lines (diagnostics as `#   ...`); exits 1 if any
# check failed. EXPECT_SERVER=redis runs the scenarios against a real redis-server (ActorKV's own
# error texts and CROSSNS skipped), to check the scenarios themselves.
require "redis"
require "timeout"

SOCK = ARGV.fetch(0)
EXPECT_SERVER = ENV.fetch("EXPECT_SERVER", "actorkv")
ACTORKV = EXPECT_SERVER == "actorkv"
TAG = ENV["RUN_TAG"] || Process.pid.to_s
SCENARIO_LIMIT = Integer(ENV.fetch("SCENARIO_LIMIT", "40"))
UNKNOWN_TEXT = 'ActorKV keeps keys in namespaces: see protocol.md "Differences from Redis"'
MISSING = ACTORKV ? "LPUSH" : "NOSUCHCOMMAND"
STABLE = 10_000
WORKERS = 4
INCREMENTS = 300
$stdout.sync = true
$failures = 0

def ok(name) = puts("ok - ruby-redis: #{name}")

def not_ok(name, *diagnostics)
  $failures += 1
  puts "not ok - ruby-redis: #{name}"
  diagnostics.each { |d| d.to_s.each_line { |line| puts "#   #{line.chomp}" } }
end

def check(name, condition, *diagnostics)
  condition ? ok(name) : not_ok(name, *diagnostics)
  condition
end

def expect_eq(name, expected, actual)
  check(name, expected == actual, "expected: #{expected.inspect}", "actual:   #{actual.inspect}")
end

def expect_error(name, *needles, kind: Redis::BaseError)
  result = yield
  not_ok(name, "no error; the call returned #{result.inspect}")
  false
rescue kind => e
  # ruby-redis sends command names in lower case, and Redis quotes the name as it was sent.
  missing = needles.reject { |n| e.message.downcase.include?(n.downcase) }
  check(name, missing.empty?, "error: #{e.class}: #{e.message}", *missing.map { |n| "expected it to contain: #{n}" })
end

def skip(name) = puts("#   skip (EXPECT_SERVER=#{EXPECT_SERVER}): #{name}")
def ns(scenario) = "ruby-#{scenario}-#{TAG}"
def connect = Redis.new(path: SOCK)

def run(scenario)
  start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Timeout.timeout(SCENARIO_LIMIT) { send(scenario) }
rescue Exception => e # a scenario that raises (or hangs) fails, the others still run
  raise if e.is_a?(SystemExit) || e.is_a?(Interrupt)
  not_ok("#{scenario} ran to the end", "#{e.class}: #{e.message}", *Array(e.backtrace).first(3))
ensure
  puts format("#   %s took %.1fs", scenario, Process.clock_gettime(Process::CLOCK_MONOTONIC) - start)
end

# ---------------------------------------------------------------------------------------------
def connect_with_defaults
  r = connect
  expect_eq("PING on a new connection", "PONG", r.ping)
  id = r.call(%w[CLIENT ID])
  check("CLIENT ID is an integer", id.is_a?(Integer), "CLIENT ID: #{id.inspect}")
  expect_eq("CLIENT SETNAME", "OK", r.call(%w[CLIENT SETNAME ruby-redis]))
  expect_eq("CLIENT GETNAME", "ruby-redis", r.call(%w[CLIENT GETNAME]))
  expect_eq("a second client connects too", "PONG", connect.ping)
  r.close
end

def hash_commands
  r = connect
  key = ns("hash")
  expect_eq("HSET one new field -> 1", 1, r.hset(key, "a", "1"))
  expect_eq("HSET hash of two new fields -> 2", 2, r.hset(key, { "b" => "2", "c" => "3" }))
  expect_eq("HSET of an existing field -> 0", 0, r.hset(key, "a", "10"))
  expect_eq("HGET", "10", r.hget(key, "a"))
  expect_eq("HGET of a missing field -> nil", nil, r.hget(key, "nope"))
  expect_eq("HGETALL", { "a" => "10", "b" => "2", "c" => "3" }, r.hgetall(key))
  expect_eq("HDEL of one present and one missing field -> 1", 1, r.hdel(key, "b", "nope"))
  expect_eq("HGETALL after HDEL", { "a" => "10", "c" => "3" }, r.hgetall(key))
  expect_eq("HMGET", ["10", nil, "3"], r.hmget(key, "a", "nope", "c"))
  expect_eq("HLEN", 2, r.hlen(key))
  expect_eq("HEXISTS present / missing", [true, false], [r.hexists(key, "a"), r.hexists(key, "b")])
  expect_eq("HSETNX new / existing", [true, false], [r.hsetnx(key, "d", "4"), r.hsetnx(key, "d", "5")])
  expect_eq("HINCRBY", 15, r.hincrby(key, "a", 5))
  expect_eq("HKEYS", %w[a c d], r.hkeys(key).sort)
  expect_eq("HVALS", %w[15 3 4], r.hvals(key).sort)
  binary = "\x00\xff\r\nbin\x80ary".b
  r.hset(key, "bin", binary)
  expect_eq("binary value round trip", binary, r.hget(key, "bin").b)
  expect_eq("HGETALL of a hash nobody wrote -> {}", {}, r.hgetall(ns("never-written")))
  flat = r.call(["HGETALL", key])
  check("HGETALL arrives as a flat array (RESP2)", flat.is_a?(Array) && flat.size == 8, "raw: #{flat.inspect}")
  r.hset(key, { "m*x" => "1", "mAx" => "2", "m?x" => "3", "mbx" => "4", "mb" => "5" })
  [["m*", %w[m*x m?x mAx mb mbx]], ["m[a-zA]x", %w[mAx mbx]], ['m\*x', %w[m*x]], ["nothing*", []]].each do |pattern, expected|
    expect_eq("hscan_each(match: #{pattern.inspect})", expected, r.hscan_each(key, match: pattern).map(&:first).sort)
  end
  r.close
end

def stable_value(field) = "value-#{Integer(field.delete_prefix('stable:'), 10)}"

def check_stable_once(name, seen)
  counts = Hash.new(0)
  wrong = []
  unexpected = []
  seen.each do |field, value|
    if field.start_with?("stable:")
      counts[field] += 1
      wrong << [field, value] if value != stable_value(field)
    elsif !field.start_with?("churn:")
      unexpected << field
    end
  end
  missing = (0...STABLE).map { |n| format("stable:%05d", n) }.reject { |f| counts.key?(f) }
  twice = counts.select { |_, c| c > 1 }.keys
  check(name, missing.empty? && twice.empty? && wrong.empty? && unexpected.empty?,
        "#{missing.size} missing (first: #{missing.first(3).inspect})",
        "#{twice.size} returned more than once (first: #{twice.first(3).inspect})",
        "#{wrong.size} with a wrong value (first: #{wrong.first(3).inspect})",
        "#{unexpected.size} unexpected fields (first: #{unexpected.first(3).inspect})")
end

# Another process: adds, rewrites and deletes churn:N fields until its stop pipe closes. It writes
# one byte on its report pipe after 50 writes, and every 20 writes its count to report_path.
def churn_writer(key, stop_reader, report)
  r = connect
  i = 0
  loop do
    break if IO.select([stop_reader], nil, nil, 0)
    i += 1
    r.hset(key, "churn:#{i}", i.to_s)
    r.hset(key, "churn:#{i - 1}", "rewritten") if (i % 3).zero?
    r.hdel(key, "churn:#{i - 40}") if i > 40
    report.write("s") if i == 50
    if (i % 20).zero? # written aside, then renamed: a reader sees a whole number
      File.write("#{report_path(key)}.new", i.to_s)
      File.rename("#{report_path(key)}.new", report_path(key))
    end
  end
  report.write("s") if i < 50
end

def report_path(key) = File.join(ENV.fetch("TMPDIR", "/tmp"), "#{key}.writes")
def writes(key) = (Integer(File.read(report_path(key)), 10) rescue 0)

def hscan_under_writes
  r = connect
  key = ns("scan")
  (0...STABLE).step(1000) do |i|
    fields = (i...i + 1000).to_h { |n| [format("stable:%05d", n), "value-#{n}"] }
    expect_eq("HSET of 1,000 fields at once (#{i / 1000 + 1}/10)", 1000, r.hset(key, fields))
  end
  expect_eq("HLEN after the fill", STABLE, r.hlen(key))
  stop_reader, stop_writer = IO.pipe
  report_reader, report = IO.pipe
  writer = fork do
    stop_writer.close
    report_reader.close
    churn_writer(key, stop_reader, report)
    exit!(0)
  end
  stop_reader.close
  report.close
  begin
    report_reader.read(1)
    before = writes(key)
    seen = r.hscan_each(key).to_a
    during = writes(key) - before
    check_stable_once("hscan_each saw each of #{STABLE} stable fields exactly once, with its value, while another process wrote", seen)
    check("the other process wrote while hscan_each ran", during.positive?, "writes during the scan: #{during}")
    puts "#   hscan_each: #{seen.size} pairs, #{during} concurrent writes"

    # The pages of one scan asked on two connections in turn; raw replies, to see the cursors.
    clients = [r, connect]
    cursor = "0"
    pages = 0
    pairs = []
    bad = []
    loop do
      cursor, flat = clients[pages % 2].call(["HSCAN", key, cursor, "COUNT", "500"])
      pages += 1
      bad << cursor unless cursor.match?(/\A[0-9]+\z/) && Integer(cursor, 10) <= 2**53
      pairs.concat(flat.each_slice(2).to_a)
      break if cursor == "0" || pages > 10_000
    end
    check_stable_once("HSCAN pages alternating between two connections: each stable field exactly once, while another process wrote", pairs)
    check("every HSCAN cursor is an unsigned decimal integer <= 2^53", bad.empty?, "bad cursors: #{bad.first(5).inspect}")
    check("the paging above took more than one page", pages > 1, "pages: #{pages}")
    clients[1].close
  ensure
    stop_writer.close
    _, status = Process.wait2(writer)
    File.delete(report_path(key)) if File.exist?(report_path(key))
  end
  expect_eq("the writer process exited cleanly", 0, status.exitstatus)
  r.close
end

# ruby-redis writes a whole pipeline before it reads a reply: 5,000 HGETs of 1 KB are 5 MB of
# replies, past the server's 1 MiB output limit (it must read on while they wait; a server that
# stopped reading would make the write time out after ruby-redis's default 5 s).
def large_pipeline
  r = connect
  key = ns("large-pipeline")
  value = "v" * 1000
  r.hset(key, "f", value)
  replies = r.pipelined { |p| 5000.times { p.hget(key, "f") } }
  expect_eq("pipelined { } of 5,000 HGETs of 1 KB: every reply", [5000, true],
            [replies.size, replies.all?(value)])
  r.close
end

def multi_batch
  r = connect
  key = ns("multi")
  r.hset(key, "w", "old")
  replies = r.multi do |tx|
    tx.hset(key, "x", "1")
    tx.hset(key, { "y" => "2", "z" => "3" })
    tx.hdel(key, "w")
    tx.hincrby(key, "n", 5)
    tx.hget(key, "x")
    tx.hexists(key, "w")
  end
  expect_eq("multi { } batch replies", [1, 2, 1, 5, "1", false], replies)
  before = { "n" => "5", "x" => "1", "y" => "2", "z" => "3" }
  expect_eq("multi { } batch applied", before, r.hgetall(key).sort.to_h)
  expect_error("multi { } with an unknown command raises", "unknown command") do
    r.multi do |tx|
      tx.hset(key, "p", "1")
      tx.call([MISSING, key, "q"])
      tx.hset(key, "q", "1")
    end
  end
  expect_eq("... and applied none of its commands", before, r.hgetall(key).sort.to_h)
  if ACTORKV
    expect_error("multi { } over two hashes (namespaces) -> CROSSNS", "CROSSNS") do
      r.multi do |tx|
        tx.hset(key, "p", "1")
        tx.hset(ns("multi-other"), "p", "1")
      end
    end
    expect_eq("... and applied nothing in the first", before, r.hgetall(key).sort.to_h)
    expect_eq("... nor in the second", {}, r.hgetall(ns("multi-other")))
    # Stronger than Redis (protocol.md): a command failing inside EXEC applies nothing.
    r.hset(key, "text", "not a number")
    expect_error("multi { } whose HINCRBY fails at EXEC raises", "not an integer") do
      r.multi do |tx|
        tx.hset(key, "p", "1")
        tx.hincrby(key, "text", 1)
      end
    end
    expect_eq("... and applied none of it (ActorKV rolls back; Redis would keep the HSET)",
              before.merge("text" => "not a number").sort.to_h, r.hgetall(key).sort.to_h)
    r.hdel(key, "text")
  else
    skip("multi { } over two hashes -> CROSSNS; a failing HINCRBY applies nothing")
  end
  expect_eq("the connection is still usable", "PONG", r.ping)
  r.close
end

def incr_worker(key, go, report)
  r = connect
  go.read(1)
  tries = 0
  INCREMENTS.times do
    loop do
      tries += 1
      result = r.watch(key) do
        value = Integer(r.hget(key, "counter") || "0", 10)
        r.multi { |tx| tx.hset(key, "counter", (value + 1).to_s) }
      end
      break unless result.nil?
    end
  end
  report.puts(tries - INCREMENTS)
end

def transactions
  r = connect
  key = ns("tx")
  other = connect
  result = r.watch(key) do
    r.hget(key, "counter")
    other.hset(key, "intruder", "1")
    r.multi { |tx| tx.hset(key, "counter", "99") }
  end
  expect_eq("WATCH, another client writes the hash, EXEC -> nil", nil, result)
  expect_eq("... and the transaction's write was not applied", nil, r.hget(key, "counter"))
  result = r.watch(key) do
    other.hset(ns("tx-elsewhere"), "f", "1")
    r.multi { |tx| tx.hset(key, "counter", "0") }
  end
  expect_eq("WATCH, a write to another hash, EXEC -> applied", [1], result)
  r.hdel(key, "counter")
  other.close

  start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  go_reader, go = IO.pipe
  report_reader, report = IO.pipe
  pids = Array.new(WORKERS) do
    fork do
      go.close
      report_reader.close
      incr_worker(key, go_reader, report)
      exit!(0)
    end
  end
  go_reader.close
  report.close
  go.write("g" * WORKERS)
  go.close
  statuses = pids.map { |pid| Process.wait2(pid)[1].exitstatus }
  retries = report_reader.read.split.sum { |n| Integer(n, 10) }
  expect_eq("#{WORKERS} processes exited cleanly", [0] * WORKERS, statuses)
  expect_eq("#{WORKERS} processes x #{INCREMENTS} watch { multi { } } increments of one field",
            (WORKERS * INCREMENTS).to_s, r.hget(key, "counter"))
  puts format("#   transactions: %d WATCH retries, %.1fs", retries, Process.clock_gettime(Process::CLOCK_MONOTONIC) - start)
  r.close
end

# The keyspace walks: a hash with fields is a key, one whose fields were all deleted is not.
def keyspace
  r = connect
  a, b, gone = ns("ksa"), ns("ksb"), ns("ksgone")
  r.hset(a, "f", "1")
  r.hset(b, { "f" => "1", "g" => "2" })
  r.hset(gone, "f", "1")
  r.hdel(gone, "f")
  pattern = "ruby-ks*-#{TAG}"
  expected = [a, b].sort
  expect_eq("scan_each(match:) lists the hashes with fields, not the emptied one", expected, r.scan_each(match: pattern, count: 1).to_a.sort)
  expect_eq("scan_each(type: 'hash')", expected, r.scan_each(match: pattern, type: "hash").to_a.sort)
  expect_eq("keys(pattern)", expected, r.keys(pattern).sort)
  cursor, everything = r.scan(0)
  expect_eq("scan(0) answers in one page, which dbsize counts", ["0", everything.size], [cursor, r.dbsize]) if ACTORKV
  expect_eq("type: hash / none", %w[hash none], [r.type(a), r.type(gone)])
  expect_eq("mapped_hmset replies OK and sets the fields", ["OK", { "f" => "1", "g" => "2" }], [r.mapped_hmset(a, { "g" => "2" }), r.hgetall(a)])
  check("randomkey is a hash", r.type(r.randomkey) == "hash")
  expect_eq("exists? of one hash: with fields / emptied", [true, false], [r.exists?(b), r.exists?(gone)])
  r.close
end

def unknown_commands
  r = connect
  key = ns("unknown")
  r.hset(key, { "a" => "1", "b" => "2" })
  before = r.hgetall(key)
  if ACTORKV
    expect_error("set raises", "unknown command 'SET'", UNKNOWN_TEXT) { r.set(key, "x") }
    expect_error("lpush raises", "unknown command 'LPUSH'", UNKNOWN_TEXT) { r.lpush(key, "x") }
  end
  expect_error("#{MISSING} raises", "unknown command") { r.call([MISSING, key, "x"]) }
  expect_error("HSET with no field raises", "wrong number of arguments") { r.call(["HSET", key]) }
  expect_eq("... and the hash is untouched", before, r.hgetall(key))
  expect_eq("the connection is still usable", "PONG", r.ping)
  r.close
end

puts "# ruby-redis #{Redis::VERSION}, ruby #{RUBY_VERSION}"
%i[connect_with_defaults hash_commands hscan_under_writes large_pipeline multi_batch transactions keyspace unknown_commands].each { |s| run(s) }
exit($failures.zero? ? 0 : 1)
