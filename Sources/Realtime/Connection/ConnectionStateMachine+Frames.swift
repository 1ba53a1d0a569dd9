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
            output.append(deliver(message, as: message.event))
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
        guard case .connected(var connected) = phase else {
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
            actions.append(channelEvent(message))
            return actions
        }
        switch ProtocolEventName(rawValue: split.name) {
        case .ping:
            actions.append(.send(RealtimeMessage(event: namespace.event(.pong), data: "{}").text, generation: generation))
        case .pong:
            break
        case .subscriptionSucceeded:
            actions += subscriptionSucceeded(message)
        case .memberAdded, .memberRemoved:
            let added = split.name == ProtocolEventName.memberAdded.rawValue
            guard let name = message.channel, channels[name]?.kind == .presence,
                  let member = message.data.flatMap(PresenceMember.init(parsing:)) else {
                return actions + [.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) without a presence channel or member, ignored"))]
            }
            // Each member is listed once: a repeated add or an unknown removal changes nothing.
            var changed = false
            updateChannel(name) { changed = added ? $0.members.add(member) : $0.members.remove(member.userID) }
            if changed { actions.append(deliver(message, as: namespace.event(added ? .memberAdded : .memberRemoved))) }
        case .signinSuccess:
            guard case .awaitingServer(let request)? = connected.signin else {
                return actions + [.report(RealtimeError(kind: .protocolViolation, message: "signin_success without a signin, ignored"))]
            }
            let userData = (try? message.decodeData([String: String].self))?["user_data"]
            connected.signin = .signedIn(userData: userData ?? message.data ?? "")
            update(connected)
            actions += [.cancel(.signin(request: request)), .cancelRequest(request)]
        case .subscriptionError:
            if let name = message.channel, channels.contains(name) {
                updateChannel(name) { $0.subscribed = false; $0.members = PresenceMembers() }
                actions.append(deliver(message, as: namespace.event(.subscriptionError)))
            } else {
                actions.append(serverError(message))
            }
        case .error:
            if let name = message.channel, channels.contains(name) {
                actions.append(deliver(message, as: message.event))
            } else if case .awaitingServer(let request)? = connected.signin,
                      let payload = try? message.decodeData(ErrorPayload.self),
                      payload.code == Int(RealtimeCloseCode.unauthorized.rawValue) {
                // The answer to our signin: a refusal is an error with code 4009 (DESIGN.md,
                // "Signin"); other errors meanwhile are the connection's.
                connected.signin = nil
                update(connected)
                actions += [.cancel(.signin(request: request)), .reportSignin(.refusedByServer(code: payload.code, message: payload.message))]
            } else {
                actions.append(serverError(message))
            }
        case .roomEvent, .roomHistory:
            actions += rooms.frame(message, name: ProtocolEventName(rawValue: split.name), generation: generation, now: now)
        case .connectionEstablished:
            actions.append(.report(RealtimeError(kind: .protocolViolation, message: "a second handshake on one connection, ignored")))
        default:
            if let name = message.channel, channels.contains(name) {
                actions.append(channelEvent(message))
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
        for name in channels.order { actions += subscribeOrAuthorize(name, now: now) }
        if signinRequested { actions += startSignin(now: now) }
        actions += rooms.connected(generation: generation, now: now)
        actions += [.stream(.opened), .stream(.ready)]
        return actions
    }

    private mutating func subscriptionSucceeded(_ message: RealtimeMessage) -> [Action] {
        guard let name = message.channel, let record = channels[name] else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "subscription_succeeded for \(message.channel ?? "no channel"), which is not subscribed"))]
        }
        guard record.requested else {
            // A confirmation of nothing asked on this connection (an authorisation is still in
            // flight, or the server invents it): the channel stays unsubscribed.
            return [.report(RealtimeError(kind: .protocolViolation, message: "subscription_succeeded for \(name), which was not asked on this connection, ignored"))]
        }
        if record.kind == .presence {
            guard let presence = try? message.decodeData(PresenceSubscriptionData.self).presence else {
                return [.report(RealtimeError(kind: .protocolViolation, message: "presence subscription_succeeded for \(name) without a member list"))]
            }
            let members = PresenceMembers(presence.ids.map { PresenceMember(userID: $0, userInfo: presence.hash[$0]) })
            updateChannel(name) { $0.members = members }
        }
        updateChannel(name) { $0.subscribed = true }
        return [deliver(message, as: configuration.namespace.event(.subscriptionSucceeded))]
    }

    /// An app event on a channel; an encrypted channel's is opened first.
    private func channelEvent(_ message: RealtimeMessage) -> Action {
        guard let name = message.channel, let record = channels[name] else {
            // An event in flight when the app unsubscribed, or a server bug: reported, so
            // nothing disappears silently.
            return .report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(message.channel ?? "no channel"), which is not subscribed"))
        }
        guard record.kind == .encrypted else { return deliver(message, as: message.event) }
        // Opened with the shared secret before any handler runs; one that does not open is
        // reported and never delivered.
        let failure: String
        if let key = record.sharedSecret {
            do {
                let payload = try message.decodeData(EncryptedPayload.self)
                let plaintext = try SecretBox.open(payload, key: key)
                guard let text = String(validating: plaintext, as: UTF8.self) else {
                    throw SecretBoxError.malformed("the plaintext is not UTF-8")
                }
                return deliver(message, as: message.event, data: text)
            } catch {
                failure = "\(error)"
            }
        } else {
            failure = "no shared secret for the channel"
        }
        return .report(RealtimeError(kind: .decryption, message: "\(message.event) on \(name) not delivered: \(failure)"))
    }

    private func deliver(_ message: RealtimeMessage, as name: String, data: String? = nil) -> Action {
        .deliver(RealtimeEvent(event: name, channel: message.channel ?? "", data: data ?? message.data, userID: message.userID))
    }

    private func serverError(_ message: RealtimeMessage) -> Action {
        let payload = try? message.decodeData(ErrorPayload.self)
        return .report(RealtimeError(kind: .server, code: payload?.code, message: payload?.message ?? message.data ?? "error without data"))
    }
}
