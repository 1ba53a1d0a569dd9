extension RealtimeHub {
    /// The hub's state and counters in Prometheus' text format (version 0.0.4), for
    /// `GET /metrics`. Gauges are this node's, read under the hub's lock (one pass over apps,
    /// channels and rooms); counters are since the hub started.
    ///
    /// - Returns: the exposition text.
    public func metricsText() -> String {
        struct Gauges {
            var connections: [String: Int] = [:]
            var channels: [String: Int] = [:]
            var members: [String: Int] = [:]
            var rooms: [String: Int] = [:]
            var queued = 0
            var largestQueue = 0
        }
        let apps = configurationStorage.apps.map(\.id)
        let gauges = withState { state -> Gauges in
            var gauges = Gauges()
            for app in apps {
                gauges.connections[app] = state.connectionsByApp[app, default: 0]
                let channels = state.channels[app] ?? [:]
                gauges.channels[app] = channels.count
                gauges.members[app] = channels.values.reduce(0) { $0 + $1.members.count }
                gauges.rooms[app] = state.rooms[app]?.count ?? 0
            }
            for connection in state.connections.values {
                let queued = connection.output.queuedBytes
                gauges.queued += queued
                gauges.largestQueue = max(gauges.largestQueue, queued)
            }
            return gauges
        }
        func byApp(_ values: [String: Int]) -> [(labels: [(String, String)], value: Int)] {
            apps.map { ([("app", $0)], values[$0, default: 0]) }
        }
        let keyed = metrics.keyedCounts
        var text = PrometheusText()
        text.family("realtime_connections", "gauge", "Open client connections.", byApp(gauges.connections))
        text.single("realtime_connections_limit", "gauge", "Most connections this node admits (all apps, below the descriptor limit).", configurationStorage.maxTotalConnections)
        text.family("realtime_channels", "gauge", "Channels with subscribers on this node.", byApp(gauges.channels))
        text.family("realtime_presence_members", "gauge", "Presence channel members on this node (users per channel, summed).", byApp(gauges.members))
        text.family("realtime_rooms", "gauge", "Rooms with members on this node.", byApp(gauges.rooms))
        text.single("realtime_send_queue_bytes", "gauge", "Bytes queued for clients and not yet written, all connections.", gauges.queued)
        text.single("realtime_send_queue_largest_bytes", "gauge", "The largest one connection's queue (4 MiB drops it).", gauges.largestQueue)
        text.single("realtime_service_loop_lag_seconds", "gauge", "How long a command last waited for the slowest service loop (each probed every second).",
                    seconds: Double(metrics.serviceLagMicroseconds.load(ordering: .relaxed)) / 1_000_000)
        text.single("realtime_room_replay_waits_total", "counter", "Looks at a member's socket too full for its replay's next page (one stream per connection looks; the others wait parked).",
                    metrics.replayWaits.load(ordering: .relaxed))
        text.single("realtime_slow_readers_dropped_total", "counter", "Connections dropped whose queue stayed over 512 KiB past the deadline while the node was over its replay memory.",
                    metrics.slowReadersDropped.load(ordering: .relaxed))
        text.single("realtime_room_lane_depth", "gauge", "Room requests waiting for (or running on) the history store's lane; grows while the store does not answer.", lane.depth)
        if configurationStorage.fanout != nil {
            text.single("realtime_cluster_bus_up", "gauge", "1 while the cluster's bus to Redis is connected.", isFanoutHealthy ? 1 : 0)
            let shards = fanoutShards
            if !shards.isEmpty {
                text.family("realtime_redis_shard_up", "gauge", "1 while the Redis Cluster shard (by its slots; its master now) is connected and answering; its rooms and channels wait while 0.",
                            shards.map { ([("shard", $0.slots), ("master", $0.name)], $0.up ? 1 : 0) })
            }
        }
        text.single("realtime_connections_opened_total", "counter", "Connections accepted.", metrics.connectionsOpened.load(ordering: .relaxed))
        text.single("realtime_events_total", "counter", "Channel and room events this node handed out (one per event, whatever its recipients, none included).",
                    metrics.eventsPublished.load(ordering: .relaxed))
        text.single("realtime_room_events_replayed_total", "counter", "Room events sent again from history to members resuming from their positions.",
                    metrics.eventsReplayed.load(ordering: .relaxed))
        text.single("realtime_connections_closed_total", "counter", "Connections ended, by either side.", metrics.connectionsClosed.load(ordering: .relaxed))
        text.family("realtime_connections_refused_total", "counter", "Connections refused at the handshake, by reason.", [
            ([("reason", "unknown_app")], metrics.refusedUnknownApp.load(ordering: .relaxed)),
            ([("reason", "over_capacity")], metrics.refusedOverCapacity.load(ordering: .relaxed)),
            ([("reason", "shutting_down")], metrics.refusedShuttingDown.load(ordering: .relaxed)),
        ])
        text.family("realtime_server_closes_total", "counter", "Connections the server closed, by close code.",
                    keyed.closes.sorted { $0.key < $1.key }.map { ([("code", String($0.key))], $0.value) })
        text.single("realtime_messages_received_total", "counter", "Text frames received from clients.", metrics.messagesReceived.load(ordering: .relaxed))
        text.single("realtime_received_bytes_total", "counter", "Bytes of the text frames received.", metrics.bytesReceived.load(ordering: .relaxed))
        text.single("realtime_messages_sent_total", "counter", "Text frames queued to clients.", metrics.messagesSent.load(ordering: .relaxed))
        text.single("realtime_sent_bytes_total", "counter", "Bytes of the text frames queued.", metrics.bytesSent.load(ordering: .relaxed))
        text.single("realtime_slow_consumers_dropped_total", "counter", "Clients dropped for a send backlog over its bound.", metrics.slowConsumersDropped.load(ordering: .relaxed))
        text.single("realtime_protocol_errors_total", "counter", "Frames refused as not the protocol.", metrics.protocolErrors.load(ordering: .relaxed))
        text.single("realtime_subscriptions_refused_total", "counter", "Channel subscriptions refused.", metrics.subscriptionsRefused.load(ordering: .relaxed))
        text.single("realtime_room_lane_refused_total", "counter", "Room requests refused store_full with the lane at its bound.", metrics.roomLaneRefused.load(ordering: .relaxed))
        text.family("realtime_http_responses_total", "counter", "HTTP answers, by status code.",
                    keyed.statuses.sorted { $0.key < $1.key }.map { ([("status", String($0.key))], $0.value) })
        return text.text
    }

    /// What is over the bounds of the node's room and presence lanes now, one line per shard
    /// lane, none when nothing (`RoomLane.overBounds`). The seeded simulation checks it as its
    /// queue invariant (docs/rooms-protocol.md, "Invariants"); the send queues' bound is the
    /// WebSocket layer's (`ConnectionOutput`).
    package var lanesOverBounds: [String] { lane.overBounds + presenceLane.overBounds }
}
