"""The Redis store's Lua scripts: one per operation that must be atomic, loaded once and run by EVALSHA.

Facts relied on: Redis runs a script atomically (no other command interleaves); scripts may call ``TIME``
(effects replication, the default since Redis 5) so expiry decisions use the server's clock; a Lua number passed
to ``redis.call`` is formatted with 17 significant digits, so amounts stay exact below 2^53; cjson encodes numbers
with 14 digits, so amounts are kept as strings inside cjson documents. On Redis Cluster every key one script
touches is in one slot: budget keys share the hash tag ``{scope}``, a log's keys ``{name}``, records ``{rec}``.
Counters released by a sweep are named from the scope's key base (same tag, so same slot) rather than passed in.
"""

from __future__ import annotations

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: add to a counter that still exists, never below zero
_ADD = """
local function add(k, delta)
  if redis.call('EXISTS', k) == 1 then
    local v = redis.call('INCRBY', k, delta)
    if v < 0 then redis.call('SET', k, '0', 'KEEPTTL') end
  end
end
"""

#: release expired reservations of the scope: KEYS[1] expiry zset, KEYS[2] id -> amounts hash, base = ARGV[1]
_SWEEP = """
local function sweep(base)
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 200)
  for _, id in ipairs(ids) do
    local raw = redis.call('HGET', KEYS[2], id)
    if raw then
      for _, pair in ipairs(cjson.decode(raw)) do
        if pair[2] ~= '0' then add(base .. 'c:' .. pair[1], '-' .. pair[2]) end
      end
      redis.call('HDEL', KEYS[2], id)
    end
    redis.call('ZREM', KEYS[1], id)
  end
end
"""

# KEYS: zset, hash, settled marker, counters...; ARGV: base, id ('' = none), ttl_ms, then per item
# (key, limit, amount, key_ttl_ms, cut '1'/'0'). Returns {1, reserved amount per item...} admitted (just {1} for a
# known id) or {0, index, used}. A cut item fits while used < limit (or with an amount of 0) and reserves at most
# limit - used, as base.reserved_amount says.
RESERVE = _NOW + _ADD + _SWEEP + """
sweep(ARGV[1])
local rid = ARGV[2]
if rid ~= '' and (redis.call('HEXISTS', KEYS[2], rid) == 1 or redis.call('EXISTS', KEYS[3]) == 1) then
  return {1}
end
local n = #KEYS - 3
local reserved = {}
for i = 1, n do
  local used = tonumber(redis.call('GET', KEYS[3 + i]) or '0')
  local a = 3 + (i - 1) * 5
  local amount, limit = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 2])
  reserved[i] = ARGV[a + 3]
  if ARGV[a + 5] == '1' then
    if amount > 0 then
      if used >= limit then return {0, i - 1, used} end
      if amount > limit - used then reserved[i] = string.format('%d', limit - used) end
    end
  elseif used + amount > limit then return {0, i - 1, used} end
end
local amounts = {}
for i = 1, n do
  local k, a = KEYS[3 + i], 3 + (i - 1) * 5
  redis.call('INCRBY', k, reserved[i])
  if redis.call('PTTL', k) == -1 then redis.call('PEXPIRE', k, ARGV[a + 4]) end
  amounts[i] = {ARGV[a + 1], reserved[i]}
end
if rid ~= '' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), rid)
  redis.call('HSET', KEYS[2], rid, cjson.encode(amounts))
end
table.insert(reserved, 1, 1)
return reserved
"""

# KEYS: zset, hash, settled marker, counters of the items...; ARGV: base, id, keep_ms, actual amounts...
SETTLE = _NOW + _ADD + _SWEEP + """
sweep(ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then return 'duplicate' end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
local raw = redis.call('HGET', KEYS[2], ARGV[2])
if not raw then
  for i = 4, #KEYS do add(KEYS[i], ARGV[i]) end
  return 'late'
end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[2])
for i, pair in ipairs(cjson.decode(raw)) do
  local delta = tonumber(ARGV[3 + i]) - tonumber(pair[2])
  if delta ~= 0 then add(ARGV[1] .. 'c:' .. pair[1], string.format('%d', delta)) end
end
return 'settled'
"""

# KEYS: zset, hash, counters...; ARGV: base
USAGE = _NOW + _ADD + _SWEEP + """
sweep(ARGV[1])
local out = {}
for i = 3, #KEYS do out[i - 2] = tonumber(redis.call('GET', KEYS[i]) or '0') end
return out
"""

# KEYS: key; ARGV: amount, ttl_ms ('' = none)
INCR = """
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v
"""

# KEYS: lease key; ARGV: holder, ttl_ms
LEASE = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
"""

# KEYS: breaker hash (u = open until, f = comma-separated failure times); ARGV: threshold, window, cooldown, now
BREAKER_FAILURE = """
local threshold, window, cooldown, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl = 2 * cooldown + window
local u = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
if u > now then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 0
end
local fails = {}
for t in string.gmatch(redis.call('HGET', KEYS[1], 'f') or '', '[^,]+') do
  if tonumber(t) > now - window then fails[#fails + 1] = t end
end
while #fails > threshold - 1 do table.remove(fails, 1) end
fails[#fails + 1] = ARGV[4]
local opened = 0
if u > 0 or #fails >= threshold then
  opened = 1
  u = now + cooldown
  fails = {}
end
redis.call('HSET', KEYS[1], 'u', string.format('%d', u), 'f', table.concat(fails, ','))
redis.call('PEXPIRE', KEYS[1], ttl)
return opened
"""

# KEYS: breaker hash; ARGV: now. Closes a half-open breaker.
BREAKER_SUCCESS = """
local u = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
if u > 0 and u <= tonumber(ARGV[1]) then redis.call('DEL', KEYS[1]) end
return 0
"""

# Records: KEYS: docs hash of the kind, version counter, the kind's counter, the count of changes counted per kind,
# the kind's change log (a list, newest first, of '<change number>:<id>'); ARGV: workspace-set prefix, id, workspace,
# value (value = '<len(workspace)>:<workspace><doc>', so the old workspace can be read back here), the log's length.
# The total counter less the per-kind count is what older releases changed.
_OLD_WORKSPACE = """
local function workspace_of(value)
  local n = string.match(value, '^(%d+):')
  return string.sub(value, #n + 2, #n + 1 + tonumber(n))
end
local function count_change(log_len)
  local n = redis.call('INCR', KEYS[3])
  redis.call('INCR', KEYS[4])
  redis.call('LPUSH', KEYS[5], n .. ':' .. ARGV[2])
  redis.call('LTRIM', KEYS[5], 0, tonumber(log_len) - 1)
end
"""

RECORD_PUT = _OLD_WORKSPACE + """
local old = redis.call('HGET', KEYS[1], ARGV[2])
if old then
  local ws = workspace_of(old)
  if ws ~= ARGV[3] then redis.call('SREM', ARGV[1] .. ws, ARGV[2]) end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('SADD', ARGV[1] .. ARGV[3], ARGV[2])
count_change(ARGV[5])
return redis.call('INCR', KEYS[2])
"""

# The create: RECORD_PUT's KEYS and ARGV. The doc, the workspace set and the counters are written only while the
# docs hash has no field for the id, so a create that lost leaves nothing behind. Returns 1 when stored (or when the
# record already holds this very value: a retried call), 0 when another record holds the id.
RECORD_CREATE = _OLD_WORKSPACE + """
local old = redis.call('HGET', KEYS[1], ARGV[2])
if old then
  if old == ARGV[4] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('SADD', ARGV[1] .. ARGV[3], ARGV[2])
count_change(ARGV[5])
redis.call('INCR', KEYS[2])
return 1
"""

# The conditional replace: RECORD_PUT's KEYS and ARGV, then ARGV[6] the doc expected (without its workspace
# prefix). Returns 1 when stored, 0 when the record is missing or holds neither the expected doc nor the new value.
RECORD_PUT_IF = _OLD_WORKSPACE + """
local old = redis.call('HGET', KEYS[1], ARGV[2])
if not old then return 0 end
local ws = workspace_of(old)
if old ~= ARGV[4] and string.sub(old, #string.match(old, '^(%d+):') + 2 + #ws) ~= ARGV[6] then return 0 end
if ws ~= ARGV[3] then redis.call('SREM', ARGV[1] .. ws, ARGV[2]) end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('SADD', ARGV[1] .. ARGV[3], ARGV[2])
count_change(ARGV[5])
redis.call('INCR', KEYS[2])
return 1
"""

# RECORD_DELETE's KEYS and ARGV; ARGV[4], when given, the doc expected (without its workspace prefix): a record
# holding another is not deleted.
RECORD_DELETE = _OLD_WORKSPACE + """
local old = redis.call('HGET', KEYS[1], ARGV[2])
if not old then return 0 end
if ARGV[4] and string.sub(old, #string.match(old, '^(%d+):') + 2 + #workspace_of(old)) ~= ARGV[4] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('SREM', ARGV[1] .. workspace_of(old), ARGV[2])
redis.call('INCR', KEYS[2])
count_change(ARGV[3])
return 1
"""

# The record counters and, per kind, the changes logged after a count. KEYS: total counter, the count of changes
# counted per kind, then per kind its counter and its change log; ARGV: per kind the count whose later changes are
# wanted (-1: none). Returns {total, kinded, count, {entries...}, count, {entries...}...}: a kind's entries are the
# newest of its log, enough to cover its gap (the reader checks they do: ``base.logged_changes``).
RECORD_VERSIONS = """
local out = {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '0')}
for i = 1, #ARGV do
  local count = tonumber(redis.call('GET', KEYS[2 * i + 1]) or '0')
  local since = tonumber(ARGV[i])
  local entries = {}
  if since >= 0 and count > since then
    entries = redis.call('LRANGE', KEYS[2 * i + 2], 0, count - since - 1)
  end
  out[#out + 1] = count
  out[#out + 1] = entries
end
return out
"""

# KEYS: docs hash, workspace set. Returns id, value, id, value...
RECORD_LIST_WORKSPACE = """
local ids = redis.call('SMEMBERS', KEYS[2])
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[1], id)
  if v then out[#out + 1] = id; out[#out + 1] = v end
end
return out
"""

# Logs: KEYS: seq counter, items list; ARGV: item, max_len
LOG_APPEND = """
local seq = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
return seq
"""

# KEYS: seq counter, items list; ARGV: after_seq, limit. Returns {first_seq_returned, items...} or {}.
LOG_READ = """
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local len = redis.call('LLEN', KEYS[2])
local first = last - len + 1
local start = math.max(tonumber(ARGV[1]) + 1, first)
local limit = tonumber(ARGV[2])
if start > last or limit <= 0 then return {} end
local items = redis.call('LRANGE', KEYS[2], start - first, start - first + limit - 1)
table.insert(items, 1, start)
return items
"""
