import ReconnectTesting

/// One fault of a schedule. The schedule's faults are drawn before it runs, from a random
/// stream of their own: a run that leaves some out (shrinking a failing schedule) meets the
/// others at the same times with the same parameters.
package enum Fault: Sendable, Hashable, CustomStringConvertible {
    /// A member's socket drops on its side (its network went).
    case drop(member: Int)
    /// A node's bus subscription is lost for a while.
    case busLost(node: Int, milliseconds: Int)
    /// A node is killed and started again: its connections drop, its state is gone.
    case nodeRestart(node: Int)
    /// A room's history is lost (a flush): its next event starts a new epoch.
    case historyLost(room: Int)
    /// The node closes a member's connection with a code (4200 reconnect now, 4201 no pong).
    case serverClose(member: Int, code: UInt16)
    /// A member's process stops for a while (SIGSTOP, an app in the background).
    case freeze(member: Int, milliseconds: Int)
    /// A member's process is killed and started again from the positions it saved.
    case clientRestart(member: Int)
    /// The store fails over for a while (every call refused meanwhile, the bus's subscriptions
    /// dropped), the new master with every write.
    case failover(milliseconds: Int)
    /// The store fails over for a while and the new master lacks a room's newest writes.
    case lossyFailover(room: Int, losing: Int, milliseconds: Int)

    package var description: String {
        switch self {
        case .drop(let member): return "drop m\(member + 1)"
        case .busLost(let node, let milliseconds): return "bus of node \(node) lost for \(milliseconds) ms"
        case .nodeRestart(let node): return "node \(node) restarted"
        case .historyLost(let room): return "room\(room + 1)'s history lost"
        case .serverClose(let member, let code): return "m\(member + 1) closed with \(code)"
        case .freeze(let member, let milliseconds): return "m\(member + 1) frozen for \(milliseconds) ms"
        case .clientRestart(let member): return "m\(member + 1) restarted from its saved positions"
        case .failover(let milliseconds): return "failover for \(milliseconds) ms"
        case .lossyFailover(let room, let losing, let milliseconds): return "failover for \(milliseconds) ms losing room\(room + 1)'s newest \(losing)"
        }
    }
}

/// A fault and when it happens, nanoseconds from the start.
package struct PlannedFault: Sendable, Hashable, CustomStringConvertible {
    package var at: Int64
    package var fault: Fault

    package var description: String { "t=\(at / 1_000_000) ms: \(fault)" }

    /// A schedule's faults: one every 100-900 ms until `active` (nanoseconds), of the kinds
    /// below in these proportions (of 14, or 15 with lossy failovers): drops 3, bus losses 2,
    /// node restarts 2, history lost 1, closes 4200/4201 2, freezes 1, client restarts 2,
    /// failovers 1 (and lossy ones 1).
    static func plan(seed: UInt64, members: Int, nodes: Int, rooms: Int, active: Int64, lossyFailovers: Bool) -> [PlannedFault] {
        var random = SeededRandomNumberGenerator(seed: seed ^ 0x5eed_fa17_5eed_fa17)
        func draw(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        var plan: [PlannedFault] = []
        var at = Int64(draw(100...900)) * 1_000_000
        while at < active {
            let member = draw(0...(members - 1))
            let node = draw(0...(nodes - 1))
            let room = draw(0...(rooms - 1))
            let fault: Fault
            switch draw(0...(lossyFailovers ? 14 : 13)) {
            case 0...2: fault = .drop(member: member)
            case 3, 4: fault = .busLost(node: node, milliseconds: draw(100...2_500))
            case 5, 6: fault = .nodeRestart(node: node)
            case 7: fault = .historyLost(room: room)
            case 8, 9: fault = .serverClose(member: member, code: draw(0...1) == 0 ? 4200 : 4201)
            case 10: fault = .freeze(member: member, milliseconds: draw(200...8_000))
            case 11, 12: fault = .clientRestart(member: member)
            case 13: fault = .failover(milliseconds: draw(300...1_500))
            default: fault = .lossyFailover(room: room, losing: draw(1...3), milliseconds: draw(300...1_500))
            }
            plan.append(PlannedFault(at: at, fault: fault))
            at += Int64(draw(100...900)) * 1_000_000
        }
        return plan
    }
}

extension SimulatedWorld {
    /// A failing schedule shrunk (as QuickCheck and TigerBeetle's VOPR shrink): each of its
    /// faults left out in turn, and kept out while the schedule still fails, until no single
    /// fault more can go. The faults left keep their times and parameters (they are drawn apart,
    /// `PlannedFault.plan`); the world's other draws (network delays, a restarted client's jitter)
    /// come from one stream, so after a fault left out they differ, and what is left may fail in
    /// another way than the whole schedule did: it still fails, exactly replayed by `run(only:)`.
    ///
    /// - Parameters:
    ///   - seed: the schedule's seed.
    ///   - faults: how many faults its plan has (`plan.count`).
    ///   - failing: the whole schedule's outcome, which failed.
    /// - Returns: the indexes in `plan` of the faults kept, and the last failing run's outcome.
    package static func shrink(seed: UInt64, faults: Int, failing whole: Outcome, lossyFailovers: Bool) -> (kept: [Int], outcome: Outcome) {
        var kept = Set(0..<faults)
        var failing = whole
        var changed = true
        // Bounded: every pass that goes on removes a fault.
        while changed {
            changed = false
            for index in kept.sorted() {
                let trial = kept.subtracting([index])
                let outcome = SimulatedWorld(seed: seed, lossyFailovers: lossyFailovers).run(only: trial)
                guard !outcome.violations.isEmpty else { continue }
                kept = trial
                failing = outcome
                changed = true
            }
        }
        return (kept.sorted(), failing)
    }
}
