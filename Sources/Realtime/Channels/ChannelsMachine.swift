import Foundation
import RealtimeProtocol

/// Channels and signin, without I/O, beside the connection's lifecycle machine
/// (realtime-connection-lifecycle seed, "What happens to channels"; Pusher protocol 7): a
/// channel's subscription (with an authorisation for the connection's id where its kind needs
/// one), the answers to those requests, presence members, client events, encrypted channels'
/// events opened, and the signin of every connection.
///
/// Subscriptions and the signin belong to one connection: the connection's machine hands it
/// each handshake (`connected`) and each end (`disconnected`), routes the channel frames here,
/// and performs the actions it returns, in order. Request ids come from the connection's
/// counter, so one table of requests in flight serves channels and rooms.
struct ChannelsMachine {
    typealias Action = ConnectionStateMachine.Action

    /// The signin of the current connection.
    enum Signin: Hashable {
        /// The user authentication was asked for.
        case authenticating(request: UInt64)
        /// `<ns>:signin` was sent; the server's answer is awaited.
        case awaitingServer(request: UInt64)
        /// The server accepted: its user data.
        case signedIn(userData: String)
    }

    /// What the current connection has of channels and signin.
    struct Session: Hashable {
        let generation: UInt64
        /// The handshake's socket id: every authorisation is signed for it.
        let socketID: String
        /// Authorisations in flight for this connection, by channel: their request ids.
        var authorizations: [String: UInt64] = [:]
        var signin: Signin?
    }

    let configuration: ConnectionStateMachine.Configuration
    /// The channels the app subscribed to.
    private(set) var table = ChannelTable()
    /// `signin()` was called: sign in on every connection.
    private(set) var signinRequested = false
    /// The connection that had its handshake, if any.
    private(set) var session: Session?

    init(configuration: ConnectionStateMachine.Configuration) {
        self.configuration = configuration
    }

    // MARK: - Reads

    subscript(name: String) -> ChannelTable.Record? { table[name] }

    /// The channels in subscription order.
    var order: [String] { table.order }

    /// The kind of a channel subscribed to (the per-frame lookup).
    func kind(of name: String) -> ChannelKind? { table.kind(of: name) }

    var signedInUserData: String? {
        if case .signedIn(let userData)? = session?.signin { userData } else { nil }
    }

    // MARK: - The connection

    /// The handshake of the socket `generation`, with its socket id: every channel is
    /// subscribed again (authorised for the new id), and the signin made if asked for.
    mutating func connected(generation: UInt64, socketID: String, now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        session = Session(generation: generation, socketID: socketID)
        var actions: [Action] = []
        for name in table.order { actions += subscribeOrAuthorize(name, now: now, ids: &ids) }
        if signinRequested { actions += startSignin(now: now, ids: &ids) }
        return actions
    }

    /// The connection ended: its requests are cancelled (seed: "it cannot reuse the old
    /// signature, which contains the old id"), no channel is subscribed, no one signed in.
    mutating func disconnected() -> [Action] {
        guard let ended = session else { return [] }
        session = nil
        table.resetConnection()
        var actions: [Action] = []
        for (channel, request) in ended.authorizations.sorted(by: { $0.key < $1.key }) {
            actions += [.cancel(.authorization(channel: channel, request: request)), .cancelRequest(request)]
        }
        switch ended.signin {
        case .authenticating(let request)?, .awaitingServer(let request)?:
            actions += [.cancel(.signin(request: request)), .cancelRequest(request)]
        case .signedIn?, nil:
            break
        }
        return actions
    }

    // MARK: - App commands

    /// `subscribe(name)`: a new channel is subscribed at once when connected, otherwise after
    /// the next handshake.
    mutating func subscribe(_ name: String, now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        guard table.add(name), session != nil else { return [] }
        return subscribeOrAuthorize(name, now: now, ids: &ids)
    }

    /// `unsubscribe(name)`: never resubscribed; `<ns>:unsubscribe` sent when connected.
    mutating func unsubscribe(_ name: String) -> [Action] {
        guard table.remove(name), var current = session else { return [] }
        var actions: [Action] = []
        if let request = current.authorizations.removeValue(forKey: name) {
            actions += [.cancel(.authorization(channel: name, request: request)), .cancelRequest(request)]
            session = current
        }
        if let text = try? RealtimeMessage(event: configuration.namespace.event(.unsubscribe), payload: UnsubscribeRequest(channel: name)).text {
            actions.append(.send(text, generation: current.generation))
        }
        return actions
    }

    /// A client event (the channel checked the name and kind): sent only while subscribed.
    ///
    /// - Returns: whether it was sent, and the actions.
    func trigger(_ event: String, data: String, on channel: String) -> (sent: Bool, actions: [Action]) {
        guard let session, table[channel]?.subscribed == true else { return (false, []) }
        return (true, [.send(RealtimeMessage(event: event, channel: channel, data: data).text, generation: session.generation)])
    }

    /// `signin()`: now if connected and not signed in, and on every later connection.
    mutating func signin(now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        signinRequested = true
        guard let session, session.signin == nil else { return [] }
        return startSignin(now: now, ids: &ids)
    }

    // MARK: - Requests

    /// Subscribes a public channel at once; asks for an authorisation for the others, signed
    /// for this connection's id.
    mutating func subscribeOrAuthorize(_ name: String, now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        guard let record = table[name], var current = session else { return [] }
        guard record.kind.needsAuthorization else {
            table.update(name) { $0.requested = true }
            return [subscribeFrame(name, generation: current.generation)]
        }
        var actions: [Action] = []
        if let old = current.authorizations[name] { actions += [.cancel(.authorization(channel: name, request: old)), .cancelRequest(old)] }
        let request = ids.next()
        current.authorizations[name] = request
        session = current
        return actions + [
            .schedule(.authorization(channel: name, request: request), at: now + configuration.authTimeout),
            .authorize(ChannelAuthorizationRequest(socketID: current.socketID, channelName: name), request: request),
        ]
    }

    /// An authorisation answered, failed or timed out. Answers to an older request — one made
    /// for a previous connection id, or replaced since — are discarded.
    mutating func authorizationAnswered(channel name: String, request: UInt64, _ result: Result<ChannelAuthorizationResponse, AuthorizationError>) -> [Action] {
        guard var current = session, current.authorizations[name] == request else { return [] }
        current.authorizations[name] = nil
        session = current
        var actions: [Action] = [.cancel(.authorization(channel: name, request: request)), .cancelRequest(request)]
        guard let record = table[name] else { return actions }
        switch result.flatMap({ response in Self.validate(response, kind: record.kind).map { (response, $0) } }) {
        case .success(let (response, (me, secret))):
            table.update(name) { record in
                record.me = me
                record.sharedSecret = secret
                record.requested = true
            }
            actions.append(subscribeFrame(name, auth: response.auth, channelData: response.channelData, generation: current.generation))
        case .failure(let error):
            table.update(name) { $0.subscribed = false; $0.members = PresenceMembers() }
            var fields: [String: JSONValue] = ["type": .string("AuthError"), "error": .string("\(error)")]
            if let status = error.status { fields["status"] = .number(Double(status)) }
            let data = (try? RealtimeMessage.jsonText(JSONValue.object(fields))) ?? "{}"
            actions.append(.deliver(RealtimeEvent(event: configuration.namespace.event(.subscriptionError), channel: name, data: data)))
        }
        return actions
    }

    /// Checks an authorisation answer against what the channel's kind needs.
    static func validate(_ response: ChannelAuthorizationResponse, kind: RealtimeChannel.Kind) -> Result<(PresenceMember?, [UInt8]?), AuthorizationError> {
        guard !response.auth.isEmpty else { return .failure(.invalidResponse("an empty auth")) }
        switch kind {
        case .presence:
            guard let text = response.channelData,
                  let member = PresenceMember(parsing: text) else {
                return .failure(.invalidResponse("a presence authorisation without channel_data holding a user_id"))
            }
            return .success((member, nil))
        case .encrypted:
            guard let text = response.sharedSecret, let key = Data(base64Encoded: text), key.count == SecretBox.keySize else {
                return .failure(.invalidResponse("an encrypted channel's authorisation without a 32-byte base64 shared_secret"))
            }
            return .success((nil, Array(key)))
        case .private, .public:
            return .success((nil, nil))
        }
    }

    private func subscribeFrame(_ name: String, auth: String? = nil, channelData: String? = nil, generation: UInt64) -> Action {
        let request = SubscribeRequest(channel: name, auth: auth, channelData: channelData)
        // A SubscribeRequest's strings always encode.
        let text = (try? RealtimeMessage(event: configuration.namespace.event(.subscribe), payload: request).text) ?? ""
        return .send(text, generation: generation)
    }

    // MARK: - Signin

    mutating func startSignin(now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        guard var current = session else { return [] }
        let request = ids.next()
        current.signin = .authenticating(request: request)
        session = current
        return [
            .schedule(.signin(request: request), at: now + configuration.authTimeout),
            .authenticate(socketID: current.socketID, request: request),
        ]
    }

    /// The user authentication answered: send `<ns>:signin` (the server's answer gets the same
    /// deadline), or report the failure.
    mutating func signinAuthenticated(request: UInt64, _ result: Result<UserAuthenticationResponse, AuthorizationError>, now: ContinuousClock.Instant) -> [Action] {
        guard var current = session, current.signin == .authenticating(request: request) else { return [] }
        switch result {
        case .success(let response):
            current.signin = .awaitingServer(request: request)
            session = current
            var actions: [Action] = [.schedule(.signin(request: request), at: now + configuration.authTimeout)]
            if let text = try? RealtimeMessage(event: configuration.namespace.event(.signin), payload: SigninRequest(auth: response.auth, userData: response.userData)).text {
                actions.append(.send(text, generation: current.generation))
            }
            return actions
        case .failure(let error):
            current.signin = nil
            session = current
            return [.cancel(.signin(request: request)), .cancelRequest(request), .reportSignin(error)]
        }
    }

    /// The signin's deadline: the authentication or the server did not answer in time.
    mutating func signinTimedOut(request: UInt64) -> [Action] {
        guard var current = session else { return [] }
        switch current.signin {
        case .authenticating(request)?, .awaitingServer(request)?:
            current.signin = nil
            session = current
            return [.cancelRequest(request), .reportSignin(.timedOut(configuration.authTimeout))]
        default:
            return []
        }
    }

    // MARK: - Frames from the server

    /// `<ns>:subscription_succeeded`: only for a subscription asked on this connection.
    mutating func subscriptionSucceeded(_ message: RealtimeMessage) -> [Action] {
        guard let name = message.channel, let record = table[name] else {
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
            table.update(name) { $0.members = members }
        }
        table.update(name) { $0.subscribed = true }
        return [Self.deliver(message, as: configuration.namespace.event(.subscriptionSucceeded))]
    }

    /// `<ns>:member_added` and `<ns>:member_removed` on a presence channel: each member listed
    /// once, a repeated add or an unknown removal changes (and delivers) nothing.
    mutating func memberChanged(_ message: RealtimeMessage, added: Bool) -> [Action] {
        guard let name = message.channel, table[name]?.kind == .presence,
              let member = message.data.flatMap(PresenceMember.init(parsing:)) else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) without a presence channel or member, ignored"))]
        }
        var changed = false
        table.update(name) { changed = added ? $0.members.add(member) : $0.members.remove(member.userID) }
        return changed ? [Self.deliver(message, as: configuration.namespace.event(added ? .memberAdded : .memberRemoved))] : []
    }

    /// `<ns>:signin_success`: the signin's answer.
    mutating func signinSucceeded(_ message: RealtimeMessage) -> [Action] {
        guard var current = session, case .awaitingServer(let request)? = current.signin else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "signin_success without a signin, ignored"))]
        }
        let userData = (try? message.decodeData([String: String].self))?["user_data"]
        current.signin = .signedIn(userData: userData ?? message.data ?? "")
        session = current
        return [.cancel(.signin(request: request)), .cancelRequest(request)]
    }

    /// `<ns>:subscription_error` and `<ns>:error` for a channel, or an error answering the
    /// signin (code 4009, DESIGN.md "Signin").
    ///
    /// - Returns: `nil` when it is neither: the connection's own error.
    mutating func errorFrame(_ message: RealtimeMessage, subscription: Bool) -> [Action]? {
        if let name = message.channel, table.contains(name) {
            if subscription { table.update(name) { $0.subscribed = false; $0.members = PresenceMembers() } }
            return [Self.deliver(message, as: subscription ? configuration.namespace.event(.subscriptionError) : message.event)]
        }
        guard !subscription, var current = session, case .awaitingServer(let request)? = current.signin,
              let payload = try? message.decodeData(ErrorPayload.self),
              payload.code == Int(RealtimeCloseCode.unauthorized.rawValue) else { return nil }
        // Other errors while the signin waits are the connection's.
        current.signin = nil
        session = current
        return [.cancel(.signin(request: request)), .reportSignin(.refusedByServer(code: payload.code, message: payload.message))]
    }

    /// An app event on a channel; an encrypted channel's is opened first.
    func channelEvent(_ message: RealtimeMessage) -> Action {
        guard let name = message.channel, let record = table[name] else {
            // An event in flight when the app unsubscribed, or a server bug: reported, so
            // nothing disappears silently.
            return .report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(message.channel ?? "no channel"), which is not subscribed"))
        }
        guard record.kind == .encrypted else { return Self.deliver(message, as: message.event) }
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
                return Self.deliver(message, as: message.event, data: text)
            } catch {
                failure = "\(error)"
            }
        } else {
            failure = "no shared secret for the channel"
        }
        return .report(RealtimeError(kind: .decryption, message: "\(message.event) on \(name) not delivered: \(failure)"))
    }

    /// A frame delivered to a channel's bindings under `name`.
    static func deliver(_ message: RealtimeMessage, as name: String, data: String? = nil) -> Action {
        .deliver(RealtimeEvent(event: name, channel: message.channel ?? "", data: data ?? message.data, userID: message.userID))
    }
}
