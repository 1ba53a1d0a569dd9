import Foundation
import RealtimeProtocol

/// Frames from the server: the handshake, pings, subscription answers, presence, signin
/// answers, errors and channel events (DESIGN.md, "The wire protocol").
extension ConnectionStateMachine {
    /// A text frame on the socket of `generation`.
    mutating func textReceived(generation: UInt64, text: String, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        textReceived(generation: generation, text: text, now: now, into: &actions)
        return actions
    }

    /// A text frame on the socket of `generation`, its actions appended to `output` (the hot
    /// path: a channel event costs no array of its own).
    mutating func textReceived(generation: UInt64, text: String, now: ContinuousClock.Instant, into output: inout [Action]) {
        guard self.generation == generation else { return }
        let activity = noteActivity(now: now)
        if !activity.isEmpty { output.append(contentsOf: activity) }
        let message: RealtimeMessage
        do {
            message = try RealtimeMessage(parsing: text)
        } catch {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "\(error)")))
            return
        }
        // A room event: its name compared whole, with no split of the name.
        if isConnected, message.event == roomEventName {
            rooms.frame(message, name: .roomEvent, generation: generation, now: now, into: &output)
            return
        }
        let split = ProtocolNamespace.split(message.event)
        // The common case first: an app event on a channel that is not encrypted.
        if isConnected, split == nil,
           let name = message.channel, let kind = channels.kind(of: name), kind != .encrypted {
            output.append(ChannelsMachine.deliver(message, as: message.event))
            return
        }
        output.append(contentsOf: frameReceived(message, split: split, generation: generation, now: now))
    }

    /// Every other frame (its activity already noted), with its event name split.
    private mutating func frameReceived(_ message: RealtimeMessage, split: (namespace: ProtocolNamespace, name: String, isInternal: Bool)?,
                                        generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        let namespace = configuration.namespace
        let split = split.flatMap { $0.namespace == namespace ? $0 : nil }
        guard case .connected = phase else {
            switch split?.name {
            case ProtocolEventName.connectionEstablished.rawValue?:
                return actions + handshake(message, generation: generation, now: now)
            case ProtocolEventName.error.rawValue?:
                return actions + [serverError(message)]
            default:
                return actions + [.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) before the handshake, ignored"))]
            }
        }
        guard let split else {
            actions.append(channels.channelEvent(message))
            return actions
        }
        switch ProtocolEventName(rawValue: split.name) {
        case .ping:
            actions.append(.send(RealtimeMessage(event: namespace.event(.pong), data: "{}").text, generation: generation))
        case .pong:
            break
        case .subscriptionSucceeded:
            actions += channels.subscriptionSucceeded(message)
        case .memberAdded, .memberRemoved:
            actions += channels.memberChanged(message, added: split.name == ProtocolEventName.memberAdded.rawValue)
        case .signinSuccess:
            actions += channels.signinSucceeded(message)
        case .subscriptionError, .error:
            let subscription = split.name == ProtocolEventName.subscriptionError.rawValue
            actions += channels.errorFrame(message, subscription: subscription) ?? [serverError(message)]
        case .roomEvent, .roomHistory:
            actions += rooms.frame(message, name: ProtocolEventName(rawValue: split.name), generation: generation, now: now)
        case .connectionEstablished:
            actions.append(.report(RealtimeError(kind: .protocolViolation, message: "a second handshake on one connection, ignored")))
        default:
            if let name = message.channel, channels[name] != nil {
                actions.append(channels.channelEvent(message))
            } else {
                actions.append(.report(RealtimeError(kind: .protocolViolation, message: "unexpected \(message.event), ignored")))
            }
        }
        return actions
    }

    private mutating func handshake(_ message: RealtimeMessage, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        // Read leniently: only the socket id is required; an activity timeout that is not a
        // positive number (a string; 30.5 is fine, 1e30 is clamped) falls back to the default.
        let fields = (try? message.decodeData([String: JSONValue].self)) ?? [:]
        guard let socketID = fields["socket_id"]?.string, !socketID.isEmpty else {
            // Seed, "The six states": a handshake without an id is an error and the socket is
            // closed; the connection retries with backoff.
            let failure = RealtimeError(kind: .handshake, message: "handshake without a socket id: \(message.data ?? "no data")")
            return [.close(.protocolError, reason: "handshake without a socket id", generation: generation)] + failAttempt(failure)
        }
        var timeout = configuration.activityTimeout
        if let seconds = fields["activity_timeout"]?.number, seconds.isFinite, seconds > 0 {
            // Clamped to 1 s…1 day: a server cannot make the client ping more than once a second.
            timeout = .seconds(min(max(seconds, Self.minimumActivityTimeout), 86_400))
        }
        let (monitor, first) = ActivityMonitor.start(timeout: timeout, now: now)
        let connected = Connected(generation: generation, socketID: socketID)
        update(connected)
        startActivity(monitor)
        var actions = set(.connected)
        actions += perform([first], for: connected)
        actions += channels.connected(generation: generation, socketID: socketID, now: now, ids: &requestIDs)
        actions += rooms.connected(generation: generation, now: now)
        actions += [.stream(.opened), .stream(.ready)]
        return actions
    }

    private func serverError(_ message: RealtimeMessage) -> Action {
        let payload = try? message.decodeData(ErrorPayload.self)
        return .report(RealtimeError(kind: .server, code: payload?.code, message: payload?.message ?? message.data ?? "error without data"))
    }
}
