extension RedisFanout {
    /// The presence scripts (Redis 7 Lua). KEYS: the topic's members and users hashes; each
    /// change that is one for everybody is published to the topic's pub/sub channel as
    /// `FanoutCodec`'s presence message, in the same script.
    enum PresenceScript {
        /// ARGV: node, user, value, TTL (ms), pub/sub channel, the `member_added` message, the
        /// node's liveness key, its TTL (refreshed here too: a member is never registered for
        /// a node the others take for dead). Returns {1 when the user's first, 1 when the
        /// node's key was gone: it was taken for dead, and its other topics need a reconcile}.
        static let join = """
        local alive = redis.call('SET', ARGV[7], '1', 'PX', ARGV[8], 'GET')
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
        if alive then return {first, 0} end
        return {first, 1}
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

        /// ARGV: node key prefix, this node. Returns user, value, … for live nodes, each user once.
        static let members = """
        local all = redis.call('HGETALL', KEYS[1])
        local alive, seen, out = {}, {}, {}
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node then
            if alive[node] == nil then alive[node] = node == ARGV[2] or redis.call('EXISTS', ARGV[1] .. node) == 1 end
            if alive[node] and not seen[user] then
              seen[user] = true
              out[#out + 1] = user
              out[#out + 1] = all[i + 1]
            end
          end
        end
        return out
        """

        /// ARGV: node, TTL (ms), pub/sub channel, the node's liveness key, its TTL, then this
        /// node's users there as user, value pairs. Makes the node's registration exactly those
        /// users: adds the missing, removes the others, publishing each change that is one for
        /// everybody. Returns `+user` / `-user` for those.
        static let reconcile = library + """
        redis.call('SET', ARGV[4], '1', 'PX', ARGV[5])
        local wanted = {}
        for i = 6, #ARGV, 2 do wanted[ARGV[i]] = ARGV[i + 1] end
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

        /// ARGV: node key prefix, TTL (ms), pub/sub channel, this node. Takes dead nodes'
        /// members out; returns the users now on no node (each published as gone, in the dead
        /// node's name: every live node, this one too, tells it).
        static let cleanup = library + """
        local all = redis.call('HGETALL', KEYS[1])
        local alive, gone = {}, {}
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node then
            if alive[node] == nil then alive[node] = node == ARGV[4] or redis.call('EXISTS', ARGV[1] .. node) == 1 end
            if not alive[node] and remove(KEYS[1], KEYS[2], node, user, ARGV[3], '') then gone[#gone + 1] = user end
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        return gone
        """
    }
}
