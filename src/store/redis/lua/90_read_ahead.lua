-- Reads made ahead for a batch (99_evaluate.lua, "A batch"): what each request would ask
-- Redis for one command at a time, asked once for the whole call. A command called from
-- Lua costs Redis more than the work it does on a key (its arguments made into a command,
-- its lookup and checks, its reply made into a table), so two commands per call instead of
-- three per request is most of what a batch saves over separate calls.
--
--   * The buckets: every request of the most common shape (one fixed_window limit, neither
--     shadow, count_rejected, counted, reported nor refunded, no quota group, no penalty
--     box: decide_plain) has its bucket and its reservation holds read by one MGET.
--   * The runtime overrides: one EXISTS over the override hashes of every request's
--     overridable limits; when none exists, no request of the call looks for an override.
--
-- Both are exact: nothing in a call writes an override, and a request's bucket and holds
-- are read ahead only when no request before it in the call names its key (a request writes
-- only its own keys and the ones beside them: ';holds', ';ban'), so a value read ahead is
-- the one the request would have read itself.
--
-- In a cluster, a batch's keys share one hash slot, but a multi-key command on a slot being
-- migrated fails when one of its keys is not there (the holds key usually is not): such a
-- read is made with redis.pcall, and when it fails the requests read their keys one at a
-- time, as they do without a batch.
local kOverrideFlagAhead = 32  -- 15_overrides.lua's kOverrideFlag

-- Set by the batch for the request being decided: its bucket's value is
-- read_ahead_values[read_ahead_at] and its holds' the next one (nil: not read ahead).
local read_ahead_values, read_ahead_at

-- What read_ahead() needs of an argument list (computed once per list, not per request):
-- whether its requests are decide_plain's shape, and the indices of its limits that may
-- take an override ({} when none).
local function list_shape(args)
  local n = number(args[#args])
  local limit, window, cost = number(args[3]), number(args[4]), number(args[9])
  local plain = n == 1 and args[2] == '0' and args[10] == '-1'
      and (args[7] == '0' or number(args[7]) % kOverrideFlagAhead == 0)
      and limit ~= nil and limit > 0 and window ~= nil and window > 0 and cost ~= nil
  -- n < 0: a reservation step's -n (80_holds.lua).
  n = n and (n < 0 and -n or n)
  local overridable = {}
  for i = 1, n or 0 do
    local flags = number(args[2 + (i - 1) * 9 + 5])
    if flags == nil then
      return false, nil
    elseif flags >= kOverrideFlagAhead then
      overridable[#overridable + 1] = i
    end
  end
  return plain, n and overridable
end

-- The sum of EXISTS over `names` (at most kReadBatch per command), or nil when a read fails.
local function count_existing(names)
  local total = 0
  for first = 1, #names, 1000 do
    local found = redis.pcall('EXISTS', unpack(names, first, min(#names, first + 999)))
    if type(found) ~= 'number' then
      return nil
    end
    total = total + found
    if total > 0 then
      return total
    end
  end
  return total
end

-- The batch's reads made ahead. `lists`: the call's argument lists; `key_count(j)` and
-- `list_of(j)` the number of keys and the list index of request j. Returns the values
-- read (2 per request read ahead: bucket, holds) and, per request j, the index of its
-- bucket's value in them (false: not read ahead); and whether no override hash of the
-- call's requests exists.
local function read_ahead(KEYS, ARGV, m, lists)
  local shapes = {}
  local overrides_known = true  -- every list's overridable limits are known
  for l = 1, #lists do
    local ok, plain, overridable = pcall(list_shape, lists[l])
    if not ok or not overridable then
      plain, overridable, overrides_known = false, {}, false
    end
    shapes[l] = { plain, overridable }
  end
  local seen, names, at, hashes = {}, {}, {}, {}
  local key_at = 0
  for j = 1, m do
    local key_count = number(ARGV[2 + 2 * j])
    local shape = shapes[number(ARGV[3 + 2 * j])]
    at[j] = false
    if shape then
      local key = KEYS[key_at + 1]
      if shape[1] and key_count == 1 and not seen[key] then
        at[j] = #names + 1
        names[#names + 1] = key
        names[#names + 1] = key .. kHoldSuffix
      end
      local overridable = shape[2]
      for x = 1, #overridable do
        local i = overridable[x]
        local bucket = i <= key_count and KEYS[key_at + i]
        local head = bucket and string.match(bucket, '^[^{]*{[^}]*}')
        if head then
          hashes[#hashes + 1] = head .. '#o'
        end
      end
    end
    for i = key_at + 1, key_at + key_count do
      seen[KEYS[i]] = true
    end
    key_at = key_at + key_count
  end
  local values
  for first = 1, #names, 1000 do
    local part = redis.pcall('MGET', unpack(names, first, min(#names, first + 999)))
    if type(part) ~= 'table' or part.err then
      values = nil
      for j = 1, m do
        at[j] = false
      end
      break
    end
    if first == 1 then
      values = part
    else
      for x = 1, #part do
        values[first + x - 1] = part[x]
      end
    end
  end
  return values, at, overrides_known and (#hashes == 0 or count_existing(hashes) == 0)
end
