-- Reservation holds (docs/reservations.md), the Lua twin of src/store/memory/hold_table.cpp
-- and of the memory store's readHolds/placeHolds (src/store/memory/memory_store.cpp).
--
-- The holds of a bucket live beside it, at its key .. ';holds' (the same hash tag, so the
-- same slot of a cluster), as cmsgpack of a flat array, kHoldStride values per hold:
--   nonce (16 hex digits), amount, expires_at (us), forget_at (us), state
-- with state 0 held, 1 committed, 2 released, 3 expired. A hold past expires_at is expired
-- (counted once, when a call first sees it); one past forget_at is forgotten. The string's
-- PX is the latest forget_at, so Redis itself drops what nobody reads again: a dead
-- sidecar's holds return at their expiry, read by whoever uses the bucket next.
--
-- A holds key is not among the script's KEYS: it shares its bucket's hash tag (so its node
-- and slot), and declaring it would make every request on a slot being migrated a
-- multi-key one whose keys are not all there (TRYAGAIN until the migration ends). It is read
-- alone, with a one-key MGET, for the same reason.
--
-- A request with a reservation step sends n as -n (ARGV[#ARGV]) and, just before it, six
-- values: op (1 reserve, 2 commit, 3 release), nonce, ttl (us), keep (us: how long a settled
-- hold is remembered after its expiry), the expiry the id carries (us), most live holds per
-- bucket (0: no bound).
-- Built by make_holds() on first use in a call (see 10_common.lua).
local kHoldSuffix = ';holds'
local kHoldStride = 5
local function make_holds()
  local lib = {}

  -- Marks expired holds, drops forgotten ones. Returns the kept array, the live sum, the
  -- earliest live expiry (0: none), the number found expired now, and whether it changed.
  function lib.refresh(t, now)
    local out = {}
    local held, first, expired, changed = 0, 0, 0, false
    for j = 1, #t, kHoldStride do
      local state = t[j + 4]
      if state == 0 and t[j + 2] <= now then
        state = 3
        expired = expired + 1
        changed = true
      end
      if t[j + 3] > now then
        local k = #out
        out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5] =
            t[j], t[j + 1], t[j + 2], t[j + 3], state
        if state == 0 then
          held = held + t[j + 1]
          if first == 0 or t[j + 2] < first then
            first = t[j + 2]
          end
        end
      else
        changed = true
      end
    end
    return out, held, first, expired, changed
  end

  -- The holds array of a raw string (nil, garbage or another type: none).
  function lib.decode(raw)
    if type(raw) ~= 'string' then
      return {}
    end
    local ok, t = pcall(cmsgpack.unpack, raw)
    if not ok or type(t) ~= 'table' or #t % kHoldStride ~= 0 then
      return {}
    end
    return t
  end

  function lib.write(key, t, now)
    if #t == 0 then
      redis.call('DEL', key)
      return
    end
    local last = now
    for j = 1, #t, kHoldStride do
      last = max(last, t[j + 3])
    end
    local ms = floor((last - now + 999) / 1000) + 1
    redis.call('SET', key, cmsgpack.pack(t), 'PX', string.format('%d', ms))
  end

  function lib.find(t, nonce)
    for j = 1, #t, kHoldStride do
      if t[j] == nonce then
        return j
      end
    end
    return nil
  end

  function lib.live(t)
    local count = 0
    for j = 1, #t, kHoldStride do
      if t[j + 4] == 0 then
        count = count + 1
      end
    end
    return count
  end

  -- A commit (op 2) or release (op 3) of `nonce` over the buckets' arrays `sets` (one per
  -- limit, nil for a sketch). Returns the status code (4 committed, 5 late, 6 released,
  -- 7 settled, 8 expired, 9 unknown) and, for a live hold, its amount. Marks the buckets'
  -- holds (adding a memory where a bucket has none, for a late commit too).
  function lib.settle(sets, n, op, nonce, id_expiry, keep, now)
    local live, settled, expired = nil, false, false
    for i = 1, n do
      local t = sets[i]
      local j = t and lib.find(t, nonce)
      if j then
        local state = t[j + 4]
        if state == 0 then
          live = live or t[j + 1]
        elseif state == 3 then
          expired = true
        else
          settled = true
        end
      end
    end
    local mark
    local status
    if live then
      mark = op == 2 and 1 or 2
      status = op == 2 and 4 or 6
    elseif settled then
      return 7, 0
    elseif expired or now >= id_expiry then
      if op ~= 2 then
        return 8, 0
      end
      mark, status = 1, 5
    else
      return 9, 0
    end
    local forget = max(now, id_expiry) + keep
    for i = 1, n do
      local t = sets[i]
      if t then
        local j = lib.find(t, nonce)
        if j then
          t[j + 1], t[j + 3], t[j + 4] = 0, max(t[j + 3], forget), mark
        else
          local k = #t
          t[k + 1], t[k + 2], t[k + 3], t[k + 4], t[k + 5] = nonce, 0, id_expiry, forget, mark
        end
      end
    end
    return status, live or 0
  end

  -- Adds a live hold, forgetting the settled holds remembered the shortest time ahead when
  -- the array would pass 2 * max(max_holds, 1) holds.
  function lib.add(t, nonce, amount, expires, forget, max_holds)
    local bound = 2 * max(max_holds, 1)
    while #t / kHoldStride >= bound do
      local oldest
      for j = 1, #t, kHoldStride do
        if t[j + 4] ~= 0 and (oldest == nil or t[j + 3] < t[oldest + 3]) then
          oldest = j
        end
      end
      if oldest == nil then
        break
      end
      for _ = 1, kHoldStride do
        table.remove(t, oldest)
      end
    end
    local k = #t
    t[k + 1], t[k + 2], t[k + 3], t[k + 4], t[k + 5] = nonce, amount, expires, forget, 0
  end

  return lib
end
