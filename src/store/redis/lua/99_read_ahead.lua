-- Reads made ahead for a batch (99_evaluate.lua, "A batch"), part of the request script only
-- (the store composes it before 99_evaluate.lua; the eventual store's script, which takes the
-- algorithms' files, leaves the 99_ ones out): what each request would ask
-- Redis for one command at a time, asked once for the whole call. A command called from
-- Lua costs Redis more than the work it does on a key (its arguments made into a command,
-- its lookup and checks, its reply made into a table), so two commands per call instead of
-- three per request is most of what a batch saves over separate calls.
--
--   * The buckets: every request of the most common shape (one fixed_window limit, neither
--     shadow, count_rejected, counted, reported nor refunded, no quota group, no penalty
--     box: decide_plain) has its bucket and its reservation holds read by one MGET.
--     A bucket named again by requests of that shape only is read once, and written once by
--     the last of them (99_evaluate.lua's decide_in_slot).
--   * The runtime overrides: one EXISTS over the override hashes of every request's
--     overridable limits; when none exists, no request of the call looks for an override.
--
-- Both are exact: nothing in a call writes an override, and a request's bucket and holds
-- are read ahead only when no request before it in the call names its key, or only requests
-- of that shape do (a request writes only its own keys and the ones beside them: ';holds',
-- ';ban'). Those share its values: on the fast path 99_evaluate.lua decides each on what the
-- ones before it left and writes the key once; off it, each after the first reads its
-- bucket itself. So what a request decides on is what it would have read itself.
--
-- In a cluster, a batch's keys share one hash slot, but a multi-key command on a slot being
-- migrated fails when one of its keys is not there (the holds key usually is not): such a
-- read is made with redis.pcall, and when it fails the requests read their keys one at a
-- time, as they do without a batch.
local kOverrideFlagAhead = 32  -- 15_overrides.lua's kOverrideFlag

-- Set by the batch for the request being decided: its bucket's value is
-- read_ahead_values[read_ahead_at] and its holds' the next one (nil: not read ahead).
local read_ahead_values, read_ahead_at

-- The functions below are built by make_read_ahead() in a batch only (a lone request's call
-- does not pay for their closures: 10_common.lua's cost model); it returns read_ahead().
local function make_read_ahead()
  local find, sub = string.find, string.sub
  -- What read_ahead() needs of an argument list, computed once per list (not per request):
  -- for decide_plain's shape, its limit's L, W and cost (else false); then the indices of its
  -- limits that may take an override ({}: none; nil: the list cannot be read).
  local function list_shape(args)
    local n = number(args[#args])
    local limit, window, cost = number(args[3]), number(args[4]), number(args[9])
    local plain = false
    if n == 1 and args[2] == '0' and args[10] == '-1'
        and (args[7] == '0' or number(args[7]) % kOverrideFlagAhead == 0)
        and limit ~= nil and limit > 0 and window ~= nil and window > 0 and cost ~= nil then
      plain = { limit, window, max(cost, 0) }
    end
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

  -- The sum of EXISTS over `names` (at most 1000 per command: unpack's C stack limit), or nil
  -- when a read fails.
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

  -- The values of `names`, in order (MGET, at most 1000 keys per command), or nil when a read
  -- fails.
  local function read_all(names)
    local values
    for first = 1, #names, 1000 do
      local part = redis.pcall('MGET', unpack(names, first, min(#names, first + 999)))
      if type(part) ~= 'table' or part.err then
        return nil
      end
      if first == 1 then
        values = part
      else
        for x = 1, #part do
          values[first + x - 1] = part[x]
        end
      end
    end
    return values or {}
  end

  -- The batch's reads made ahead (the request loop of 99_evaluate.lua's batch reads each
  -- request's key count and list index the same way). A bucket named again by a request of
  -- decide_plain's shape, with no other kind of request naming it in between, is read once:
  -- the later requests share the first one's values (a `slot`), and decide on what the
  -- requests before them in the call left there. Returns
  --   values  what was read: 2 per slot (bucket, holds); nil when nothing was
  --   at      per request j read ahead, the index of its slot's bucket value in `values`
  --           (nil: not read ahead)
  --   plain   per argument list, decide_plain's { L, W, cost } or false
  --   absent  true when no override hash of the call's requests exists
  --   shared  per request j: true when a request before it has its slot
  --   more    per request j: true when a request after it has its slot
  return function(KEYS, ARGV, m, lists)
    local plain, overridable = {}, {}
    local overrides_known = true  -- every list's overridable limits are known
    for l = 1, #lists do
      local ok, p, o = pcall(list_shape, lists[l])
      if not ok or not o then
        p, o, overrides_known = false, {}, false
      end
      plain[l], overridable[l] = p, o
    end
    -- seen[key]: true once a request not read ahead names the key; else the last request
    -- that has its slot.
    local seen, names, at, hashes, shared, more = {}, {}, {}, {}, {}, {}
    local count, hash_count = 0, 0
    -- The override hash of a bucket key: 15_overrides.lua's override_place (the key up to the
    -- '}' that closes its tag, then '#o'), with plain finds.
    local function add_hash(key)
      local open = find(key, '{', 1, true)
      local close = open and find(key, '}', open + 1, true)
      if close then
        hash_count = hash_count + 1
        hashes[hash_count] = sub(key, 1, close) .. '#o'
      end
    end
    local key_at = 0
    for j = 1, m do
      local s = ARGV[2 + 2 * j]
      local key_count = s == '1' and 1 or number(s)
      s = ARGV[3 + 2 * j]
      local l = s == '1' and 1 or number(s)
      local over = overridable[l]
      if over and key_count == 1 then
        -- The common request: one key.
        local key = KEYS[key_at + 1]
        local before = seen[key]
        if plain[l] and before ~= true then
          if before then
            at[j], shared[j], more[before] = at[before], true, true
          else
            at[j] = count + 1
            names[count + 1] = key
            names[count + 2] = key .. kHoldSuffix
            count = count + 2
          end
          seen[key] = j
        else
          seen[key] = true
        end
        if over[1] == 1 then
          add_hash(key)
        end
      else
        for x = 1, over and #over or 0 do
          local i = over[x]
          local bucket = i <= key_count and KEYS[key_at + i]
          if bucket then
            add_hash(bucket)
          end
        end
        for i = key_at + 1, key_at + key_count do
          seen[KEYS[i]] = true
        end
      end
      key_at = key_at + key_count
    end
    local values = count > 0 and read_all(names) or nil
    if values == nil then
      at = {}
    end
    return values, at, plain,
        overrides_known and (hash_count == 0 or count_existing(hashes) == 0), shared, more
  end
end
