import Foundation
import RealtimeProtocol

extension RedisRoomStore {
    /// The store's Lua scripts. Each takes the room's meta and events keys.
    enum Script: String, CaseIterable, Sendable, CustomStringConvertible {
        case position, append, replay, replayPage, page, evict, rule, fork

        var description: String { rawValue }

        /// The script for one Redis (`sharded` false: the append publishes with `PUBLISH`) or a
        /// Redis Cluster (`SPUBLISH`, on the room's shard: its live channel shares the keys'
        /// slot).
        func source(sharded: Bool) -> String {
            Self.library + body.replacingOccurrences(of: "redis.call('PUBLISH'", with: sharded ? "redis.call('SPUBLISH'" : "redis.call('PUBLISH'")
        }

        /// Shared by every script: trimming a room's stream to its span, and creating a room's
        /// meta when it has none.
        private static let library = """
        local function trim(events, cutoff)
          for _ = 1, 64 do
            local head = redis.call('XRANGE', events, '-', '+', 'COUNT', 16)
            if #head == 0 then return end
            for _, entry in ipairs(head) do
              local fields, t = entry[2], nil
              for i = 1, #fields, 2 do if fields[i] == 't' then t = tonumber(fields[i + 1]) end end
              if t == nil or t > cutoff then
                redis.call('XTRIM', events, 'MINID', entry[1])
                return
              end
            end
            local last = tonumber(string.match(head[#head][1], '^(%d+)'))
            redis.call('XTRIM', events, 'MINID', string.format('%d-0', last + 1))
          end
        end
        local created = 0
        local function open(meta, events, epoch, now, idle)
          local current = redis.call('HGET', meta, 'epoch')
          if not current then
            redis.call('DEL', events)
            redis.call('HSET', meta, 'epoch', epoch, 'last', 0, 'span', \(Int64(RoomRule.maxSpan) * 1000), 'touched', now)
            current = epoch
            created = 1
          else
            redis.call('HSET', meta, 'touched', now)
          end
          redis.call('PEXPIRE', meta, idle)
          return current, tonumber(redis.call('HGET', meta, 'last')), tonumber(redis.call('HGET', meta, 'span'))
        end

        """

        private var body: String {
            switch self {
            case .position:
                // ARGV: new epoch, now, idle retention.
                return """
                local epoch, last = open(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
                return {epoch, last, created}
                """
            case .append:
                // ARGV: event, data, from, has from, at, history, span (ms), new epoch, idle retention,
                // live channel, append token, the epoch and id the appending node saw the room at
                // ('' and 0: none; a room whose last id is below it in that epoch lost writes, and
                // starts the new epoch first). The kept event is published there in the same step
                // (`FanoutCodec`'s room message), so live order is history order. KEYS[3]: this
                // store's mark of its last append to the room (`token id epoch`, for a minute): an append
                // sent again after its answer was lost finds its token there, is not kept twice, and
                // is answered with the id and epoch it was kept with (whatever fork came since).
                return """
                local epoch, last = open(KEYS[1], KEYS[2], ARGV[8], ARGV[5], ARGV[9])
                local mark = redis.call('GET', KEYS[3])
                if mark and string.sub(mark, 1, #ARGV[11] + 1) == ARGV[11] .. ' ' then
                  local rest = string.sub(mark, #ARGV[11] + 2)
                  local space = string.find(rest, ' ', 1, true)
                  if space then return {string.sub(rest, space + 1), tonumber(string.sub(rest, 1, space - 1)), 0} end
                  return {epoch, tonumber(rest), 0}
                end
                if epoch == ARGV[12] and last < tonumber(ARGV[13]) then
                  redis.call('DEL', KEYS[2])
                  epoch, last = ARGV[8], 0
                  redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', 0)
                end
                local id = last + 1
                local history, at, span = tonumber(ARGV[6]), tonumber(ARGV[5]), tonumber(ARGV[7])
                if history > 0 then
                  if ARGV[4] == '1' then
                    redis.call('XADD', KEYS[2], 'MAXLEN', history, string.format('%d-0', id), 't', ARGV[5], 'e', ARGV[1], 'd', ARGV[2], 'f', ARGV[3])
                  else
                    redis.call('XADD', KEYS[2], 'MAXLEN', history, string.format('%d-0', id), 't', ARGV[5], 'e', ARGV[1], 'd', ARGV[2])
                  end
                  trim(KEYS[2], at - span)
                  redis.call('PEXPIRE', KEYS[2], math.max(span, 1000))
                else
                  redis.call('DEL', KEYS[2])
                end
                redis.call('HSET', KEYS[1], 'last', id, 'span', span)
                redis.call('SET', KEYS[3], ARGV[11] .. ' ' .. string.format('%d', id) .. ' ' .. epoch, 'PX', 60000)
                local from, fromLength = '', -1
                if ARGV[4] == '1' then from, fromLength = ARGV[3], #ARGV[3] end
                redis.call('PUBLISH', ARGV[10], 'r ' .. epoch .. ' ' .. string.format('%d', id) .. ' ' .. ARGV[5] .. ' ' .. #ARGV[1] .. ' ' ..
                  #ARGV[2] .. ' ' .. fromLength .. '\\n' .. ARGV[1] .. ARGV[2] .. from)
                return {epoch, id, created}
                """
            case .replay:
                // ARGV: new epoch, now, idle retention, position's epoch, position's id, most events,
                // most bytes (sized as `RoomEventRecord.size`: event, data, from and 64).
                return """
                local epoch, last, span = open(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
                trim(KEYS[2], tonumber(ARGV[2]) - span)
                local after = tonumber(ARGV[5])
                if ARGV[4] ~= epoch then return {epoch, last, 'epoch_changed', {}, created} end
                if after > last then return {epoch, last, 'unknown_position', {}, created} end
                if after == last then return {epoch, last, 'ok', {}, created} end
                local most, budget = tonumber(ARGV[6]), tonumber(ARGV[7])
                local entries, bytes, lower = {}, 0, string.format('%d-0', after + 1)
                while #entries < most do
                  local page = redis.call('XRANGE', KEYS[2], lower, '+', 'COUNT', math.min(100, most - #entries))
                  if #entries == 0 and (#page == 0 or page[1][1] ~= lower) then return {epoch, last, 'expired', {}, created} end
                  for _, entry in ipairs(page) do
                    local fields = entry[2]
                    bytes = bytes + 64
                    for i = 1, #fields, 2 do
                      if fields[i] == 'e' or fields[i] == 'd' or fields[i] == 'f' then bytes = bytes + #fields[i + 1] end
                    end
                    if bytes > budget then return {epoch, last, 'too_large', {}, created} end
                    entries[#entries + 1] = entry
                  end
                  if #page < 100 then break end
                  lower = '(' .. page[#page][1]
                end
                return {epoch, last, 'ok', entries, created}
                """
            case .replayPage:
                // ARGV: new epoch, now, idle retention, position's epoch, position's id, most events,
                // most bytes (sized as `RoomEventRecord.size`). Answers the room's epoch and last id,
                // the events, and whether the room's meta was made.
                return """
                local epoch, last, span = open(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
                trim(KEYS[2], tonumber(ARGV[2]) - span)
                local after = tonumber(ARGV[5])
                if ARGV[4] ~= epoch or after >= last then return {epoch, last, {}, created} end
                local page = redis.call('XRANGE', KEYS[2], string.format('(%d-0', after), '+', 'COUNT', tonumber(ARGV[6]))
                local entries, bytes, budget = {}, 0, tonumber(ARGV[7])
                for _, entry in ipairs(page) do
                  if bytes >= budget then break end
                  local fields = entry[2]
                  bytes = bytes + 64
                  for i = 1, #fields, 2 do
                    if fields[i] == 'e' or fields[i] == 'd' or fields[i] == 'f' then bytes = bytes + #fields[i + 1] end
                  end
                  entries[#entries + 1] = entry
                end
                return {epoch, last, entries, created}
                """
            case .page:
                // ARGV: now, before ('' for the newest), limit.
                return """
                local span = redis.call('HGET', KEYS[1], 'span')
                if not span then return {{}, 0} end
                trim(KEYS[2], tonumber(ARGV[1]) - tonumber(span))
                local limit = tonumber(ARGV[3])
                local upper = '+'
                if ARGV[2] ~= '' then
                  local before = tonumber(ARGV[2])
                  if before <= 1 then return {{}, 0} end
                  upper = string.format('(%d-0', before)
                end
                local entries = redis.call('XREVRANGE', KEYS[2], upper, '-', 'COUNT', limit + 1)
                local more = 0
                if #entries > limit then
                  more = 1
                  entries[#entries] = nil
                end
                return {entries, more}
                """
            case .rule:
                // ARGV: new epoch, now, idle retention, the offered rule (JSON), when it was
                // issued (s), '1' when the app's server forces it. Answers the kept rule, when it
                // was issued, and whether the room's meta was made.
                return """
                open(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
                local rule = redis.call('HGET', KEYS[1], 'rule')
                local kept = tonumber(redis.call('HGET', KEYS[1], 'ri') or '-1')
                local offered = tonumber(ARGV[5])
                if not rule or offered > kept or ARGV[6] == '1' then
                  local at = offered
                  if rule and kept > at then at = kept end
                  redis.call('HSET', KEYS[1], 'rule', ARGV[4], 'ri', string.format('%d', at))
                  return {ARGV[4], at, created}
                end
                return {rule, kept, created}
                """
            case .fork:
                // ARGV: new epoch, now, idle retention, the seen position's epoch and id. A room
                // whose last id is below the one seen in the same epoch lost writes: its events
                // go, and it starts the new epoch at id 0. Answers the epoch, the last id, and
                // whether the room's meta was made.
                return """
                local epoch, last = open(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
                if epoch == ARGV[4] and last < tonumber(ARGV[5]) then
                  redis.call('DEL', KEYS[2])
                  redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'last', 0)
                  return {ARGV[1], 0, created}
                end
                return {epoch, last, created}
                """
            case .evict:
                // ARGV: the use (ms) the room was listed at. Deletes a room not used since and
                // keeping no event (-1; -1 too when it is gone already); one used since, or
                // keeping events, stays and answers its last use (ms).
                return """
                local touched = redis.call('HGET', KEYS[1], 'touched')
                if not touched then return -1 end
                if tonumber(touched) > tonumber(ARGV[1]) or redis.call('XLEN', KEYS[2]) > 0 then return tonumber(touched) end
                redis.call('DEL', KEYS[1], KEYS[2])
                return -1
                """
            }
        }
    }
}
