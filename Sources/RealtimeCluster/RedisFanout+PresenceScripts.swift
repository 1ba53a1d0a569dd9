import Foundation

extension RedisFanout {
    /// The presence scripts' sources for one Redis (`PUBLISH`) or a Redis Cluster
    /// (`SPUBLISH`: each topic's channel shares its presence hashes' slot), made once.
    struct PresenceScripts: Sendable {
        let join, leave, members, reconcile, cleanup, alive, live: String

        init(sharded: Bool) {
            func source(_ script: String) -> String {
                sharded ? script.replacingOccurrences(of: "redis.call('PUBLISH'", with: "redis.call('SPUBLISH'") : script
            }
            join = source(PresenceScript.join)
            leave = source(PresenceScript.leave)
            members = source(PresenceScript.members)
            reconcile = source(PresenceScript.reconcile)
            cleanup = source(PresenceScript.cleanup)
            alive = PresenceScript.alive
            live = PresenceScript.live
        }
    }

    /// The presence scripts (Redis 7 Lua). KEYS: the topic's members and users hashes; each
    /// change that is one for everybody is published to the topic's pub/sub channel as
    /// `FanoutCodec`'s presence message, in the same script.
    enum PresenceScript {
        /// KEYS: the cluster's nodes (`RedisFanout.nodesKey`, a sorted set: node → when its
        /// registration ends, in Redis' own clock, ms). ARGV: node, TTL (ms), most nodes listed,
        /// how long an ended registration stays listed (ms). Registers the node until TTL from
        /// now and forgets registrations ended longer ago than that. Returns {1 when the node
        /// was registered still (0: it was taken for dead, or Redis lost everything), the dead
        /// nodes: those whose registration ended}.
        static let alive = """
        local time = redis.call('TIME')
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        local previous = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[4]))
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[4]))
        local wasAlive = 0
        if previous > now then wasAlive = 1 end
        return {wasAlive, redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))}
        """

        /// KEYS: the live nodes' set. ARGV: most nodes listed. Returns the nodes whose
        /// registration has not ended.
        static let live = """
        local time = redis.call('TIME')
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
        """

        /// ARGV: node, user, value, TTL (ms), pub/sub channel, the `member_added` message.
        /// Returns 1 when the user is on no other node: the one `member_added`.
        static let join = """
        local field = ARGV[1] .. '\\n' .. ARGV[2]
        local first = 0
        if redis.call('HSETNX', KEYS[1], field, ARGV[3]) == 1 then
          if redis.call('HINCRBY', KEYS[2], ARGV[2], 1) == 1 then
            first = 1
            redis.call('PUBLISH', ARGV[5], ARGV[6])
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[4])
        redis.call('PEXPIRE', KEYS[2], ARGV[4])
        return first
        """

        /// Shared by the scripts: a node's registration of a user removed; when it was the
        /// user's last, the departure published and true returned.
        private static let library = """
        local function remove(members, users, node, user, channel, excluding)
          if redis.call('HDEL', members, node .. '\\n' .. user) == 0 then return false end
          if redis.call('HINCRBY', users, user, -1) > 0 then return false end
          redis.call('HDEL', users, user)
          local tail, size = '', -1
          if excluding ~= '' then tail, size = excluding, #excluding end
          redis.call('PUBLISH', channel, 'p ' .. node .. ' 0 ' .. #user .. ' -1 ' .. size .. '\\n' .. user .. tail)
          return true
        end

        """

        /// ARGV: node, user, TTL (ms), pub/sub channel, the leaving socket.
        static let leave = library + """
        if remove(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4], ARGV[5]) then return 1 end
        return 0
        """

        /// ARGV: the live nodes (this one among them). Returns user, value, … for live nodes,
        /// each user once.
        static let members = """
        local all = redis.call('HGETALL', KEYS[1])
        local alive, seen, out = {}, {}, {}
        for i = 1, #ARGV do alive[ARGV[i]] = true end
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node then
            if alive[node] and not seen[user] then
              seen[user] = true
              out[#out + 1] = user
              out[#out + 1] = all[i + 1]
            end
          end
        end
        return out
        """

        /// ARGV: node, TTL (ms), pub/sub channel, `1` to announce, then this node's users there
        /// as user, value pairs. Makes the node's registration exactly those users: adds the
        /// missing, removes the others, publishing each change that is one for everybody.
        /// Returns `+user` / `-user` for those. To announce (a node found taken for dead: the
        /// others' reads left its users out meanwhile, and may have dropped them from their
        /// views), each of its users already registered is published as present too (not
        /// returned; a node that lists the user already ignores it).
        static let reconcile = library + """
        local wanted = {}
        for i = 5, #ARGV, 2 do wanted[ARGV[i]] = ARGV[i + 1] end
        local prefix = ARGV[1] .. '\\n'
        local all = redis.call('HGETALL', KEYS[1])
        local changes = {}
        for i = 1, #all, 2 do
          if string.sub(all[i], 1, #prefix) == prefix then
            local user = string.sub(all[i], #prefix + 1)
            if wanted[user] == nil then
              if remove(KEYS[1], KEYS[2], ARGV[1], user, ARGV[3], '') then changes[#changes + 1] = '-' .. user end
            else
              wanted[user] = false
              if ARGV[4] == '1' then
                local value, info, size = all[i + 1], '', -1
                if string.sub(value, 1, 1) == 'i' then info = string.sub(value, 2); size = #info end
                redis.call('PUBLISH', ARGV[3], 'p ' .. ARGV[1] .. ' 1 ' .. #user .. ' ' .. size .. ' -1\\n' .. user .. info)
              end
            end
          end
        end
        for user, value in pairs(wanted) do
          if value and redis.call('HSETNX', KEYS[1], prefix .. user, value) == 1 then
            if redis.call('HINCRBY', KEYS[2], user, 1) == 1 then
              changes[#changes + 1] = '+' .. user
              local info, size = '', -1
              if string.sub(value, 1, 1) == 'i' then info = string.sub(value, 2); size = #info end
              redis.call('PUBLISH', ARGV[3], 'p ' .. ARGV[1] .. ' 1 ' .. #user .. ' ' .. size .. ' -1\\n' .. user .. info)
            end
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        return changes
        """

        /// ARGV: TTL (ms), pub/sub channel, then the dead nodes (`alive`'s list: registrations
        /// that ended, kept a while). Takes their members out; returns the users now on no node
        /// (each published as gone, in the dead node's name: every live node, this one too,
        /// tells it). A node missing from the list is never taken for dead: it may have
        /// registered since the list was read.
        ///
        /// A user taken out of a dead node and still on another is published as present
        /// again (not returned: nobody arrived): a join while the dead node still counted was
        /// no arrival and published nothing, while a node that read the members since (dead
        /// nodes left out) may not list the user; the nodes that list it already ignore it.
        static let cleanup = library + """
        local all = redis.call('HGETALL', KEYS[1])
        local dead, gone, kept, told = {}, {}, {}, {}
        for i = 3, #ARGV do dead[ARGV[i]] = true end
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node and not dead[node] then kept[user] = {node, all[i + 1]} end
        end
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node and dead[node] then
            if remove(KEYS[1], KEYS[2], node, user, ARGV[2], '') then
              gone[#gone + 1] = user
            elseif kept[user] and not told[user] then
              told[user] = true
              local value, info, size = kept[user][2], '', -1
              if string.sub(value, 1, 1) == 'i' then info = string.sub(value, 2); size = #info end
              redis.call('PUBLISH', ARGV[2], 'p ' .. kept[user][1] .. ' 1 ' .. #user .. ' ' .. size .. ' -1\\n' .. user .. info)
            end
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[1])
        redis.call('PEXPIRE', KEYS[2], ARGV[1])
        return gone
        """
    }
}
