import Dispatch
import Foundation
import RealtimeProtocol
import Reconnect

/// The client's options under the rooms seed's name ("the headers your RealtimeOptions give",
/// "grants in RealtimeOptions"): `BirdRealtime.Options`.
public typealias RealtimeOptions = BirdRealtime.Options

extension BirdRealtime {
    /// How a client connects (realtime-connection-lifecycle seed: `BirdRealtime(options:
    /// .init(appKey:, …))`). Defaults are the seed's: activity timeout 120 s, pong timeout 30 s,
    /// backoff with full jitter from 1 s to 30 s, handlers on the main queue.
    public struct Options: Sendable {
        /// The app's public key (the path `/app/{key}`).
        public var appKey: String
        /// The region of the app's hosted servers (`us1`), as Pusher's `cluster`: set by
        /// `init(appKey:region:…)`, which makes `host` from it; `nil` for options made with a host.
        public var region: String?
        /// The server's host name or address (`127.0.0.1` by default).
        public var host: String
        /// The server's port (80 for ws, 443 for wss when `nil`).
        public var port: Int?
        /// `wss://` instead of `ws://`.
        public var useTLS: Bool
        /// A full endpoint URL (`ws://host:port/app/key?…`), used instead of host/port/TLS.
        public var url: String?
        /// The protocol namespace (`bird`, or `pusher` for Pusher-compatible servers).
        public var namespace: ProtocolNamespace
        /// Silence before the client pings, when the handshake gives no `activity_timeout`
        /// (120 s, seed "Stale-connection check"). The handshake's value wins when present.
        public var activityTimeout: Duration
        /// How long the client waits for any frame after its ping before it closes the socket
        /// with 4201 and reconnects at once (30 s, seed "Stale-connection check").
        public var pongTimeout: Duration
        /// The shorter pong deadline used when the network path to the server changes while
        /// connected (1 s): a dead socket is found in about a second instead of up to 150 s.
        public var pathChangePongTimeout: Duration
        /// Retry delays after a drop: full jitter, base 1 s, cap 30 s (seed "Automatic
        /// reconnection"); the retry count resets when a healthy connection drops
        /// (`stableConnectionDuration`, `shortConnectionAllowance`).
        public var backoff: ExponentialBackoff
        /// How long a connection must stay up for its drop to count as a healthy connection's
        /// (5 s): then a 42xx close is retried at once (seed "Close codes") and the backoff
        /// reset. A shorter one counts too while `shortConnectionAllowance` lasts; past it, a
        /// server that ends every connection sooner, with whatever code, is retried on the
        /// growing backoff, at most one attempt per 100 ms (a server closing with
        /// 4200 after each handshake drew hundreds of connections a second).
        public var stableConnectionDuration: Duration
        /// How many connections that completed their handshake and dropped sooner than
        /// `stableConnectionDuration` still count as healthy (5; one comes back per
        /// `stableConnectionDuration`): the seed resets the backoff on every successful
        /// handshake, so a path that flapped a few times is back within the base delay, while a
        /// peer that ends every connection is soon held to the backoff.
        public var shortConnectionAllowance: Int
        /// A connect attempt with no handshake after this long is aborted and retried (30 s).
        public var connectTimeout: Duration
        /// Where every handler runs (state changes, errors, channel events): main by default.
        public var deliveryQueue: DispatchQueue
        /// An extra PEM CA file trusted for `wss://` (self-signed test servers); `nil` uses the
        /// system store only.
        public var certificateAuthorityFile: String?
        /// Whether the client watches the server's network path (netlink reachability on
        /// Linux) to reconnect as soon as it comes back and to probe the socket when it
        /// changes. On by default.
        public var watchesReachability: Bool
        /// Where private, presence and encrypted channel subscriptions are authorised: a form
        /// POST of `socket_id` and `channel_name`, answered with `{"auth", "channel_data"?,
        /// "shared_secret"?}` (DESIGN.md "The wire protocol"). `authorizer` wins when both are set.
        public var authEndpoint: URL?
        /// Headers sent with every auth, user-auth and room auth request (a session cookie, a
        /// bearer token). A name or value with a line break is refused (the request fails with
        /// `notConfigured`), never sent.
        public var authHeaders: [String: String]
        /// A closure that authorises subscriptions instead of `authEndpoint`. It runs in a task
        /// on the client's own executor (not on `deliveryQueue`), possibly concurrently for
        /// several channels; its answer is discarded if the connection changed meanwhile.
        public var authorizer: ChannelAuthorizer?
        /// Where `signin()` gets its user authentication: a form POST of `socket_id`, answered
        /// with `{"auth", "user_data"}`. `userAuthenticator` wins when both are set.
        public var userAuthEndpoint: URL?
        /// A closure that authenticates the user instead of `userAuthEndpoint`.
        public var userAuthenticator: UserAuthenticator?
        /// How long an authorisation or user authentication may take (10 s); a later answer is
        /// discarded and the channel gets `<ns>:subscription_error`.
        public var authTimeout: Duration
        /// Where room tokens are asked for (rooms seed; docs/rooms-protocol.md "Auth route"): a
        /// JSON POST of `{"rooms": [names]}` with `authHeaders`, answered with `{"time", "rooms":
        /// {name: {"token", "expires", "key"?} | {"error"}}}`. `roomAuthorizer` wins when both are set.
        public var roomAuthEndpoint: URL?
        /// A closure that answers room auth requests instead of `roomAuthEndpoint`, on the
        /// client's own executor.
        public var roomAuthorizer: RoomAuthorizer?
        /// The backend's `config()`: a grant per public room pattern, so public rooms are joined
        /// with no auth request (rooms seed: "config() gives the app its grants (grants in
        /// RealtimeOptions)"). Taken as received when the client is made
        /// (`BirdRealtime.setRoomGrants` replaces it later).
        public var grants: RoomConfiguration?
        /// The earlier name of `grants`.
        @available(*, deprecated, renamed: "grants")
        public var roomGrants: RoomConfiguration? {
            get { grants }
            set { grants = newValue }
        }
        /// How long joins wait to share one auth request (10 ms): every room joined in the same
        /// moment goes into one request.
        public var roomAuthBatchWindow: Duration
        /// The largest frame accepted from the server, in bytes (4 MiB); a larger one closes the
        /// connection with 1009. Sized for what the reference server sends within its own limits:
        /// a full presence room's `joined` (1,000 members with 1 KiB of info each) or a history
        /// page of 100 events of 10 KiB, with the escaping of the frame's data string, is up to
        /// about 2 MiB.
        public var maxMessageSize: Int
        /// The most bytes of frames queued for the server and not yet taken by the socket
        /// (1 MiB). The client sends small frames (pongs, subscriptions, client events): a
        /// server that leaves this much unread is not reading, and the connection is dropped,
        /// reported as a transport error (1006, "send buffer full: …") and retried on the
        /// backoff (pings from a server that never read the answers queued 277 MB of
        /// pongs).
        public var maxBufferedAmount: Int

        /// Creates options for a server at `host`.
        ///
        /// - Parameters:
        ///   - appKey: the app's public key.
        ///   - host: server host name or address.
        ///   - port: server port (`nil`: 80, or 443 with TLS).
        ///   - useTLS: connect with `wss://`.
        ///   - namespace: protocol namespace (`bird` by default).
        public init(appKey: String, host: String = "127.0.0.1", port: Int? = nil, useTLS: Bool = false, namespace: ProtocolNamespace = .bird) {
            self.appKey = appKey
            self.region = nil
            self.host = host
            self.port = port
            self.useTLS = useTLS
            self.url = nil
            self.namespace = namespace
            activityTimeout = .seconds(120)
            pongTimeout = .seconds(30)
            pathChangePongTimeout = .seconds(1)
            backoff = ExponentialBackoff(base: .seconds(1), cap: .seconds(30))
            stableConnectionDuration = .seconds(5)
            shortConnectionAllowance = 5
            connectTimeout = .seconds(30)
            deliveryQueue = .main
            certificateAuthorityFile = nil
            watchesReachability = true
            authEndpoint = nil
            authHeaders = [:]
            authorizer = nil
            userAuthEndpoint = nil
            userAuthenticator = nil
            authTimeout = .seconds(10)
            roomAuthEndpoint = nil
            roomAuthorizer = nil
            grants = nil
            roomAuthBatchWindow = .milliseconds(10)
            maxMessageSize = 4 << 20
            maxBufferedAmount = 1 << 20
        }

        /// The host template of hosted regions: `{region}` is replaced by the region.
        public static let defaultHostTemplate = "ws-{region}.realtime.bird.com"

        /// Creates options for a region (realtime-connection-lifecycle seed: `.init(appKey:
        /// "your-app-key", region: "us1")`): the host is `hostTemplate` with `{region}`
        /// replaced, over TLS. A self-hosted server (such as `realtime-server`) is named by
        /// its own template: `.init(appKey: "app-key", region: "local", hostTemplate:
        /// "127.0.0.1", port: 6001, useTLS: false)`.
        ///
        /// - Parameters:
        ///   - appKey: the app's public key.
        ///   - region: the region, 1…63 of `a–z A–Z 0–9 -`; another one makes the host
        ///     `invalid-region.invalid` (RFC 2606), which never resolves, so nothing is sent
        ///     elsewhere: the connection fails with a transport error.
        ///   - hostTemplate: the host with a `{region}` placeholder (or none).
        ///   - port: server port (`nil`: 443 with TLS, else 80).
        ///   - useTLS: connect with `wss://` (the default for hosted regions).
        ///   - namespace: protocol namespace (`bird` by default).
        public init(appKey: String, region: String, hostTemplate: String = Options.defaultHostTemplate, port: Int? = nil,
                    useTLS: Bool = true, namespace: ProtocolNamespace = .bird) {
            let valid = (1...63).contains(region.utf8.count)
                && region.utf8.allSatisfy { $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
            let host = valid ? hostTemplate.replacingOccurrences(of: "{region}", with: region) : "invalid-region.invalid"
            self.init(appKey: appKey, host: host, port: port, useTLS: useTLS, namespace: namespace)
            self.region = region
        }

        /// Creates options from a full endpoint URL such as `ws://127.0.0.1:6001/app/demo-key`
        /// (the app key is the last path component; `?namespace=pusher` picks the namespace).
        ///
        /// - Throws: `RealtimeError` (kind `.transport`) for a URL that is not `ws://` or
        ///   `wss://` with a host and an `/app/{key}` path.
        public init(url: String) throws(RealtimeError) {
            guard let components = URLComponents(string: url),
                  let scheme = components.scheme?.lowercased(), scheme == "ws" || scheme == "wss",
                  let host = components.host, !host.isEmpty
            else { throw RealtimeError(kind: .transport, message: "not a ws:// or wss:// URL with a host: \(url)") }
            let parts = components.path.split(separator: "/")
            guard parts.count == 2, parts[0] == "app", !parts[1].isEmpty else {
                throw RealtimeError(kind: .transport, message: "expected a path /app/{key}: \(url)")
            }
            let asked = components.queryItems?.last { $0.name == "namespace" }?.value
            self.init(appKey: String(parts[1]), host: host, port: components.port, useTLS: scheme == "wss",
                      namespace: asked.map(ProtocolNamespace.init(rawValue:)) ?? .bird)
            self.url = url
        }

        /// The URL the client opens: `url` if set, else
        /// `ws(s)://host:port/app/{key}?namespace=…&client=swift-reconnect&protocol=7` (the
        /// reference server lets the explicit `namespace=` win over `protocol=`, which alone
        /// means a Pusher client).
        public var endpoint: String {
            if let url { return url }
            let scheme = useTLS ? "wss" : "ws"
            let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            let portText = port.map { ":\($0)" } ?? ""
            return "\(scheme)://\(bracketed)\(portText)/app/\(appKey)?namespace=\(namespace.rawValue)&client=swift-reconnect&protocol=7"
        }

        /// The host watched for reachability (brackets of an IPv6 literal removed).
        var destinationHost: String {
            if url != nil, let host = URLComponents(string: endpoint)?.host { return host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }
            return host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        }
    }
}
