import Glibc

/// Which of the room lane's waiting jobs runs next: a fair share for every client.
///
/// Jobs wait per client (a connection's socket id, or `RoomLane.node` for the node's own work),
/// first in first out within each; the next job is the head of the client that used the lane
/// least lately: the costs charged to it (`RoomLane` charges bytes moved, or run time), decaying
/// by half every `halfLife`. A member sending now and then goes before a crowd paging history
/// as fast as its budgets allow, however many they are and however much they queued (least
/// attained service, as in start-time fair queueing, with the cost measured after each job). An
/// idle client banks nothing: its usage only decays.
///
/// Bounded: at most `maxJobs` wait in all and `maxPerClient` per connection. When all are
/// taken, a connection's new job displaces the newest job of the connection that used the lane
/// most, if that one used it more than the newcomer; otherwise the newcomer is refused. So a
/// crowd can fill the lane only with its own work, and what it loses is its own. The node's
/// own work is refused at the bound and never displaced.
///
/// A value: it decides, `RoomLane` runs the jobs and measures them.
struct LaneSchedule<Job> {
    /// Most jobs waiting in all.
    let maxJobs: Int
    /// Most jobs waiting for one connection (the node's own work is bounded by `maxJobs` only).
    let maxPerClient: Int
    /// The client the node's own work is queued for.
    let nodeClient: String
    /// How fast a client's usage is forgotten: by half every second.
    static var halfLife: Duration { .seconds(LaneUsage.halfLifeSeconds) }

    private struct Waiting {
        var jobs: [(sequence: UInt64, job: Job)] = []
        var head = 0
        var count: Int { jobs.count - head }
    }

    private var waiting: [String: Waiting] = [:]
    private var usage: [String: LaneUsage] = [:]
    private var sequence: UInt64 = 0
    private var picks = 0
    /// The instant usages are ranked from (the first charge's).
    private var epoch: ContinuousClock.Instant?

    /// Jobs waiting now.
    private(set) var count = 0

    /// The jobs waiting, counted from the queues themselves (not `count`), and the most one
    /// connection has waiting: what the bounds promise, `maxJobs` and `maxPerClient`.
    var backlog: (jobs: Int, largestClient: Int) {
        var jobs = 0
        var largest = 0
        for (client, queue) in waiting {
            jobs += queue.count
            if client != nodeClient { largest = max(largest, queue.count) }
        }
        return (jobs, largest)
    }

    /// - Parameters:
    ///   - maxJobs: most jobs waiting in all (at least 1).
    ///   - maxPerClient: most jobs waiting for one connection (at least 1).
    ///   - nodeClient: the client the node's own work is queued for.
    init(maxJobs: Int, maxPerClient: Int, nodeClient: String = "") {
        self.maxJobs = max(1, maxJobs)
        self.maxPerClient = max(1, maxPerClient)
        self.nodeClient = nodeClient
    }

    /// What `enqueue` did.
    enum Admission {
        /// The job waits.
        case queued
        /// The job waits; this other job, the newest of the heaviest client, was taken out to
        /// make room and is to be refused.
        case displaced(Job)
        /// Not queued: its client has `maxPerClient` waiting, or the lane is full of work of
        /// clients that used it less.
        case refused
    }

    /// Queues `job` for `client` (`node`: the node's own work, whose client is `nodeClient`).
    mutating func enqueue(_ job: Job, client: String, node: Bool, at instant: ContinuousClock.Instant) -> Admission {
        if !node, (waiting[client]?.count ?? 0) >= maxPerClient { return .refused }
        var displaced: Job?
        if count >= maxJobs {
            // The node's own work neither takes a connection's place nor gives up its own: it
            // is refused at the bound (and comes again on its next tick).
            guard !node else { return .refused }
            // Ranks order usages as they stand now (`LaneUsage.rank`).
            let usage = self.usage
            let rank = { (someone: String) in usage[someone]?.rank ?? -.infinity }
            let mine = rank(client)
            guard let heaviest = waiting.keys.filter({ $0 != nodeClient }).max(by: { rank($0) < rank($1) }),
                  heaviest != client, rank(heaviest) > mine,
                  let newest = waiting[heaviest]?.jobs.popLast() else { return .refused }
            displaced = newest.job
            count -= 1
            if waiting[heaviest]?.count == 0 { waiting[heaviest] = nil }
        }
        sequence += 1
        waiting[client, default: Waiting()].jobs.append((sequence, job))
        count += 1
        return displaced.map { .displaced($0) } ?? .queued
    }

    /// Takes the next job: the oldest of the client with the least usage now (of equals, the
    /// one whose job waited longest). Every usage decays at the same rate, so their order now
    /// is the order of their `rank`s, read without computing any decay.
    mutating func next(at instant: ContinuousClock.Instant) -> (client: String, job: Job)? {
        var best: (client: String, rank: Double, sequence: UInt64)?
        for (client, queue) in waiting {
            let rank = usage[client]?.rank ?? -.infinity
            let sequence = queue.jobs[queue.head].sequence
            if let current = best, (current.rank, current.sequence) <= (rank, sequence) { continue }
            best = (client, rank, sequence)
        }
        guard let client = best?.client, var queue = waiting.removeValue(forKey: client) else { return nil }
        let job = queue.jobs[queue.head].job
        queue.head += 1
        if queue.count > 0 {
            if queue.head > 64, queue.head * 2 > queue.jobs.count {
                queue.jobs.removeFirst(queue.head)
                queue.head = 0
            }
            waiting[client] = queue
        }
        count -= 1
        picks += 1
        if picks % 1024 == 0 { forgetIdle(at: instant) }
        return (client, job)
    }

    /// Adds `cost` (a job's, in the lane's unit) to `client`'s usage.
    mutating func charge(_ client: String, cost: Double, at instant: ContinuousClock.Instant) {
        let now = usage[client]?.value(at: instant) ?? 0
        let epoch = self.epoch ?? instant
        self.epoch = epoch
        usage[client] = LaneUsage(amount: now + cost, at: instant, epoch: epoch)
    }

    /// `client`'s usage now (decayed).
    func usage(of client: String, at instant: ContinuousClock.Instant) -> Double {
        usage[client]?.value(at: instant) ?? 0
    }

    /// Drops the usage of clients with nothing waiting whose usage decayed under 1: the table
    /// holds only clients of the last half minute or so.
    private mutating func forgetIdle(at instant: ContinuousClock.Instant) {
        usage = usage.filter { waiting[$0.key] != nil || $0.value.value(at: instant) >= 1 }
    }
}

/// A client's use of the lane, decaying by half every `halfLifeSeconds`.
private struct LaneUsage {
    static let halfLifeSeconds = 1.0

    /// Costs charged, as of `at`.
    var amount: Double
    var at: ContinuousClock.Instant
    /// log₂ of the usage carried back to the schedule's epoch (`amount · 2^(at − epoch)/halfLife`):
    /// at any instant, a client with a smaller rank used the lane less, since every usage decays
    /// by the same factor. In the log domain, so a long uptime cannot overflow it.
    let rank: Double

    init(amount: Double, at: ContinuousClock.Instant, epoch: ContinuousClock.Instant) {
        self.amount = amount
        self.at = at
        let elapsed = at - epoch
        let halves = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / Self.halfLifeSeconds
        rank = amount > 0 ? log2(amount) + halves : -.infinity
    }

    func value(at instant: ContinuousClock.Instant) -> Double {
        let elapsed = instant - at
        guard elapsed > .zero else { return amount }
        let halves = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / Self.halfLifeSeconds
        return amount * exp2(-halves)
    }
}
