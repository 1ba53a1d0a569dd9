import Foundation
import RealtimeProtocol

/// Channels and signin on the machine: subscribing (with an authorisation for the connection's
/// id where the kind needs one), answers to those requests, client events, signin
/// (realtime-connection-lifecycle seed, "What happens to channels").
extension ConnectionStateMachine {
    // MARK: - App commands

    /// `subscribe(name)`: a new channel is subscribed at once when connected, otherwise after
    /// the next handshake.
    mutating func subscribe(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard addChannel(name), connected != nil else { return [] }
        return subscribeOrAuthorize(name, now: now)
    }

    /// `unsubscribe(name)`: never resubscribed; `<ns>:unsubscribe` sent when connected.
    mutating func unsubscribe(_ name: String) -> [Action] {
        guard removeChannel(name) else { return [] }
        guard var connected else { return [] }
        var actions: [Action] = []
        if let request = connected.authorizations.removeValue(forKey: name) {
            actions += [.cancel(.authorization(channel: name, request: request)), .cancelRequest(request)]
            update(connected)
        }
        if let text = try? RealtimeMessage(event: configuration.namespace.event(.unsubscribe), payload: UnsubscribeRequest(channel: name)).text {
            actions.append(.send(text, generation: connected.generation))
        }
        return actions
    }

    /// A client event (the channel checked the name and kind): sent only while subscribed.
    ///
    /// - Returns: whether it was sent, and the actions.
    mutating func trigger(_ event: String, data: String, on channel: String) -> (sent: Bool, actions: [Action]) {
        guard let connected, channels[channel]?.subscribed == true else { return (false, []) }
        return (true, [.send(RealtimeMessage(event: event, channel: channel, data: data).text, generation: connected.generation)])
    }

    /// `signin()`: now if connected and not signed in, and on every later connection.
    mutating func signin(now: ContinuousClock.Instant) -> [Action] {
        requestSignin()
        guard let connected, connected.signin == nil else { return [] }
        return startSignin(now: now)
    }

    // MARK: - Requests

    /// Subscribes a public channel at once; asks for an authorisation for the others, signed
    /// for this connection's id.
    mutating func subscribeOrAuthorize(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = channels[name], var connected else { return [] }
        guard record.kind.needsAuthorization else {
            updateChannel(name) { $0.requested = true }
            return [subscribeFrame(name, generation: connected.generation)]
        }
        var actions: [Action] = []
        if let old = connected.authorizations[name] { actions += [.cancel(.authorization(channel: name, request: old)), .cancelRequest(old)] }
        let request = nextRequest()
        connected.authorizations[name] = request
        update(connected)
        return actions + [
            .schedule(.authorization(channel: name, request: request), at: now + configuration.authTimeout),
            .authorize(ChannelAuthorizationRequest(socketID: connected.socketID, channelName: name), request: request),
        ]
    }

    /// An authorisation answered, failed or timed out. Answers to an older request — one made
    /// for a previous connection id, or replaced since — are discarded.
    mutating func authorizationAnswered(channel name: String, request: UInt64, _ result: Result<ChannelAuthorizationResponse, AuthorizationError>) -> [Action] {
        guard var connected, connected.authorizations[name] == request else { return [] }
        connected.authorizations[name] = nil
        update(connected)
        var actions: [Action] = [.cancel(.authorization(channel: name, request: request)), .cancelRequest(request)]
        guard let record = channels[name] else { return actions }
        switch result.flatMap({ response in Self.validate(response, kind: record.kind).map { (response, $0) } }) {
        case .success(let (response, (me, secret))):
            updateChannel(name) { record in
                record.me = me
                record.sharedSecret = secret
                record.requested = true
            }
            actions.append(subscribeFrame(name, auth: response.auth, channelData: response.channelData, generation: connected.generation))
        case .failure(let error):
            updateChannel(name) { $0.subscribed = false; $0.members = PresenceMembers() }
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

    mutating func startSignin(now: ContinuousClock.Instant) -> [Action] {
        guard var connected else { return [] }
        let request = nextRequest()
        connected.signin = .authenticating(request: request)
        update(connected)
        return [
            .schedule(.signin(request: request), at: now + configuration.authTimeout),
            .authenticate(socketID: connected.socketID, request: request),
        ]
    }

    /// The user authentication answered: send `<ns>:signin` (the server's answer gets the same
    /// deadline), or report the failure.
    mutating func signinAuthenticated(request: UInt64, _ result: Result<UserAuthenticationResponse, AuthorizationError>, now: ContinuousClock.Instant) -> [Action] {
        guard var connected, connected.signin == .authenticating(request: request) else { return [] }
        switch result {
        case .success(let response):
            connected.signin = .awaitingServer(request: request)
            update(connected)
            var actions: [Action] = [.schedule(.signin(request: request), at: now + configuration.authTimeout)]
            if let text = try? RealtimeMessage(event: configuration.namespace.event(.signin), payload: SigninRequest(auth: response.auth, userData: response.userData)).text {
                actions.append(.send(text, generation: connected.generation))
            }
            return actions
        case .failure(let error):
            connected.signin = nil
            update(connected)
            return [.cancel(.signin(request: request)), .cancelRequest(request), .reportSignin(error)]
        }
    }

    /// The signin's deadline: the authentication or the server did not answer in time.
    mutating func signinTimedOut(request: UInt64) -> [Action] {
        guard var connected else { return [] }
        switch connected.signin {
        case .authenticating(request)?, .awaitingServer(request)?:
            connected.signin = nil
            update(connected)
            return [.cancelRequest(request), .reportSignin(.timedOut(configuration.authTimeout))]
        default:
            return []
        }
    }
}
