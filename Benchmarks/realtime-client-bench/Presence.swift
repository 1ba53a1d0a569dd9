import Dispatch
import Foundation
import Realtime
import RealtimeProtocol
import SystemSupport

/// Part (d), presence: `count` `member_added` frames on one presence channel, written by the
/// firehose peer right after the confirmation (one member, the client's own), timed from the
/// first member event handed to the app to the channel listing all of them (issue 14: they
/// were linear per member; 100,000 took 45 s of the socket thread).
struct PresenceBenchmark {
    var count = 100_000
    var rounds = 3
    private static let channel = "presence-bench"

    /// `count` member_added frames, users m0…m(count-1), ready to write.
    static func memberFrames(count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 110)
        for index in 0..<count {
            let data = #"{"user_id":"m\#(index)","user_info":{"n":\#(index)}}"#
            FirehosePeer.appendFrame(RealtimeMessage(event: ProtocolNamespace.bird.internalEvent(.memberAdded), channel: channel, data: data).text, to: &bytes)
        }
        return bytes
    }

    /// Per round: first member_added → all `count` listed, and the process's CPU time over it.
    func run() throws -> [(wall: Duration, cpu: Duration)] {
        let peer = try FirehosePeer()
        let stream = Self.memberFrames(count: count)
        let confirmation = #"{"presence":{"count":1,"ids":["me"],"hash":{"me":{}}}}"#
        var results: [(Duration, Duration)] = []
        for round in 1...rounds {
            progress("presence round \(round)/\(rounds): \(count.formatted()) member_added…")
            let failure = Locked<(any Error)?>(nil)
            let served = DispatchSemaphore(value: 0)
            Thread {
                do { try peer.serve(stream, confirmationData: confirmation) } catch { failure.withLock { $0 = error } }
                served.signal()
            }.start()
            var options = BirdRealtime.Options(appKey: "bench-key", host: "127.0.0.1", port: peer.port)
            options.watchesReachability = false
            options.deliveryQueue = DispatchQueue(label: "presence-bench.delivery")
            options.authorizer = { request in
                ChannelAuthorizationResponse(auth: "bench-key:0", channelData: #"{"user_id":"me"}"#)
            }
            let bird = BirdRealtime(options: options)
            let channel = bird.subscribe(Self.channel)
            let first = Locked<(ContinuousClock.Instant, Duration)?>(nil)
            let seen = Locked(0)
            let done = DispatchSemaphore(value: 0)
            let total = count
            let token = channel.bind(BirdProtocol.Event.memberAdded) { _ in
                let now = ContinuousClock.now
                first.withLock { if $0 == nil { $0 = (now, processCPUTime()) } }
                let value = seen.withLock { $0 += 1; return $0 }
                if value == total { done.signal() }
            }
            bird.connect()
            guard done.wait(timeout: .now() + .seconds(120)) == .success else { throw BenchFailure("presence: \(seen.withLock { $0 }) of \(total) member_added arrived") }
            let end = ContinuousClock.now, endCPU = processCPUTime()
            guard channel.members.count == total + 1 else { throw BenchFailure("presence: \(channel.members.count) members listed, not \(total + 1)") }
            let (start, startCPU) = first.withLock { $0 }!
            results.append((end - start, endCPU - startCPU))
            token.cancel()
            bird.disconnect()
            guard served.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("presence: the client did not close") }
            if let error = failure.withLock({ $0 }) { throw error }
        }
        return results
    }
}
