import Dispatch
import SystemSupport

/// The hub's writes: decided under its lock, performed after it (nothing is sent,
/// closed, handed to the webhook sink or the bus's subscriptions while the lock is held).
///
/// A change to the hub's state queues the frames and closes it decides in `State.outbox` (a
/// `DrainQueue`), in the order decided. Once the lock is released, one thread at a time
/// performs the queue: the caller, unless another thread is already performing, which then
/// takes these writes too. So
/// every connection gets its frames in the order the hub decided them (a channel's publish
/// order, a room's id order) while the hub's lock is held only to decide; the pattern of the
/// client's `RealtimeConnection` drain.
extension RealtimeHub {
    /// A write decided under the hub's lock.
    enum Delivery {
        /// Queue a text frame on a connection.
        case send(any ConnectionOutput, String)
        /// Close a connection with a close code (after the frames queued before it).
        case close(any ConnectionOutput, code: UInt16, reason: String)
        /// Drop a connection without a close frame.
        case abort(any ConnectionOutput)
        /// Hand a webhook event to the configured sink (`RealtimeHub.webhook`).
        case webhook(RealtimeApp, WebhookEvent)
        /// Follow a topic on the cluster's bus.
        case follow(FanoutTopic)
        /// Stop following a topic on the cluster's bus.
        case unfollow(FanoutTopic)
        /// Register a user's first connection on a topic on this node, or its last one gone, in
        /// the cluster's presence registry (`RealtimeHub.clusterPresence`), on the topic's lane.
        case presence(ClusterPresenceChange)
        /// Catch a room up from the history store on its lane (`RealtimeHub.scheduleCatchUp`).
        case catchUp(app: String, room: String)
        /// Ask the lane for a parked join's turn (`RealtimeHub.queueJoin`).
        case resumeJoin(JoinJob)
        /// Record a line of the console's live log (`RealtimeHub.console`).
        case console(ConsoleEntry)
    }

    /// Queues a line of the console's log (`ConsoleEntry`'s fields), only when the log admits
    /// one of `app` now (`ConsoleLog.admits`: a console looks, and the app's second is not
    /// spent): otherwise nothing is built, not even `detail`.
    func note(_ kind: ConsoleEntry.Kind, app: String, socketID: String? = nil, channel: String? = nil, room: String? = nil,
              userID: String? = nil, event: String? = nil, detail: @autoclosure () -> String = "", in state: inout State) {
        guard console.admits(app: app) else { return }
        state.queue(.console(ConsoleEntry(app: app, kind: kind, socketID: socketID, channel: channel, room: room,
                                          userID: userID, event: event, detail: detail())))
    }

    /// Runs `body` under the hub's lock, then performs the writes it queued with no lock held.
    ///
    /// - Parameter body: reads or changes the state; queues writes with `State.send` and
    ///   `State.queue`; must not call `withState` (the lock is not recursive).
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (the writes queued before it threw are still performed).
    func withState<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        let (result, batch) = state.withLock { state -> (Swift.Result<Result, Failure>, [Delivery]?) in
            let result: Swift.Result<Result, Failure>
            do throws(Failure) { result = .success(try body(&state)) } catch { result = .failure(error) }
            return (result, state.outbox.claim())
        }
        if let batch { drain(batch) }
        return try result.get()
    }

    /// Queues a frame decided with no lock held (on the room lane) to a connection still open:
    /// through the outbox, behind the frames decided before it, never to a forgotten connection.
    func sendQueued(_ text: String, to socketID: String) {
        withState { state in
            guard let connection = state.connections[socketID] else { return }
            state.send(text, to: connection)
        }
    }

    /// Batches one caller performs before it hands the rest to `outboxQueue`: a service loop
    /// that became the drainer goes back to its own sockets after a bounded share of the other
    /// threads' writes, however fast they keep coming.
    static let maxDrainRounds = 4

    /// Performs `batch`, then whatever was queued meanwhile, until the queue is empty; after
    /// `maxDrainRounds` batches the rest is performed on `outboxQueue` (still one drainer).
    private func drain(_ first: [Delivery]) {
        var batch = first
        var rounds = 1
        while true {
            for delivery in batch {
                switch delivery {
                case .send(let output, let text): output.send(text: text)
                case .close(let output, let code, let reason): output.close(code: code, reason: reason)
                case .abort(let output): output.abort()
                case .webhook(let app, let event): webhook(app, event)
                case .follow(let topic): configurationStorage.fanout?.follow(topic)
                case .unfollow(let topic): configurationStorage.fanout?.unfollow(topic)
                case .presence(let change): submitClusterPresence(change)
                case .catchUp(let app, let room): scheduleCatchUp(app: app, room: room)
                case .resumeJoin(let job): queueJoin(job)
                case .console(let entry): console.record(entry)
                }
            }
            batch.removeAll(keepingCapacity: true)
            guard let next = state.withLock({ $0.outbox.next(after: batch) }) else { return }
            guard rounds < Self.maxDrainRounds else {
                if let executor = configurationStorage.executor {
                    executor.async(on: outboxQueue.label) { [self] in drain(next) }
                } else {
                    outboxQueue.async { [self] in drain(next) }
                }
                return
            }
            rounds += 1
            batch = next
        }
    }
}

extension RealtimeHub.State {
    /// Queues a write, performed once the hub's lock is released.
    mutating func queue(_ delivery: RealtimeHub.Delivery) {
        outbox.pending.append(delivery)
    }

    /// Queues a frame to `connection`.
    mutating func send(_ text: String, to connection: RealtimeHub.Connection) {
        send(text, to: connection.output)
    }

    /// Queues a text frame to an output (a fan-out that reads only the output, not the record).
    mutating func send(_ text: String, to output: any ConnectionOutput) {
        queue(.send(output, text))
    }

    /// Queues a webhook event of an app with a webhook URL.
    mutating func webhook(_ app: RealtimeApp, _ event: WebhookEvent) {
        if app.webhookURL != nil { queue(.webhook(app, event)) }
    }

    /// Queues a close of `connection` after the frames queued before it.
    mutating func close(_ connection: RealtimeHub.Connection, code: UInt16, reason: String) {
        queue(.close(connection.output, code: code, reason: reason))
    }
}
