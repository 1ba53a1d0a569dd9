// The Swift snippets of the realtime-connection-lifecycle seed (docs/seeds/, Portuguese
// original and English rendering), each as written, inside a function that gives it the
// `bird` it uses. The app functions they call are stubbed below and record their calls.
import BirdRealtime
import SystemSupport

// MARK: - The app's functions the snippets call

/// Calls of the stubbed app functions, by name, and the members rendered last.
let appCalls = Locked((counts: [String: Int](), rendered: [[String]]()))

func showReconnectingBanner() { appCalls.withLock { $0.counts["showReconnectingBanner", default: 0] += 1 } }
func hideReconnectingBanner() { appCalls.withLock { $0.counts["hideReconnectingBanner", default: 0] += 1 } }
func showSignedOutScreen() { appCalls.withLock { $0.counts["showSignedOutScreen", default: 0] += 1 } }
func renderMembers(_ members: [PresenceMember]) { appCalls.withLock { $0.rendered.append(members.map(\.userID)) } }

// MARK: - "Os seis estados" (The six states)

func seedMakeClient() -> BirdRealtime {
    let bird = BirdRealtime(options: .init(appKey: "your-app-key", region: "us1"))
    return bird
}

func seedStateChanges(_ bird: BirdRealtime) {
    bird.onConnectionStateChange { previous, current in
        print(previous, "->", current)
        if current == .unavailable { showReconnectingBanner() }
        if current == .connected { hideReconnectingBanner() }
    }
}

// MARK: - "O que acontece com os canais" (What happens to channels)

func seedSigninError(_ bird: BirdRealtime) {
    bird.onSigninError { error in
        print("connection has no identity:", error.message)
    }
}

func seedPresence(_ bird: BirdRealtime) {
    guard let room = bird.subscribe("presence-room-1") as? PresenceChannel else { return }

    room.bind(BirdProtocol.Event.subscriptionSucceeded) { _ in
        renderMembers(room.members)
    }
}

// MARK: - "Desconexão intencional" (Intentional disconnect)

func seedDisconnect(_ bird: BirdRealtime) {
    bird.disconnect() // state: disconnected, no reconnect
}

func seedConnect(_ bird: BirdRealtime) {
    bird.connect() // reopens and re-subscribes
}

// MARK: - "Erros de conexão versus erros de canal" (Connection errors versus channel errors)

func seedSubscriptionError(_ room: RealtimeChannel) {
    room.bind(BirdProtocol.Event.subscriptionError) { error in
        print("could not join:", error ?? "")
    }
}

func seedConnectionError(_ bird: BirdRealtime) {
    bird.onError { error in
        print(error.code ?? 0, error.message)
    }
}

// MARK: - "Tratando o close code 4009" (Close code 4009)

func seedSignedOut(_ bird: BirdRealtime) {
    bird.onError { error in
        if error.code == 4009 { showSignedOutScreen() }
    }
}
