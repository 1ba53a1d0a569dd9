import RealtimeProtocol
import RealtimeServer
import Testing

/// The app option requiring signin within a deadline (issue 6; seed "Close code 4009").
@Suite struct RealtimeHubSigninDeadlineTests {
    func fixture(deadline: Int?) -> HubFixture {
        HubFixture {
            $0.apps[0].userAuthenticationTimeout = deadline
            $0.apps[0].maxConnections = 10
        }
    }

    func signin(_ fixture: HubFixture, _ id: String, user: String = "u1") {
        let userData = #"{"id":"\#(user)"}"#
        fixture.send(id, "bird:signin", SigninRequest(auth: fixture.signer.authorizeSignin(socketID: id, userData: userData), userData: userData))
    }

    @Test("a connection not signed in by the deadline is closed with 4009; signed-in ones stay")
    func deadline() {
        let fixture = fixture(deadline: 10)
        let (silent, _) = fixture.connect()
        let (chatty, chattyID) = fixture.connect()
        let (forger, forgerID) = fixture.connect()
        let (late, lateID) = fixture.connect()
        let (signed, signedID) = fixture.connect()
        fixture.advance(.seconds(5))
        signin(fixture, signedID)
        fixture.send(forgerID, "bird:signin", SigninRequest(auth: "app-key:00", userData: #"{"id":"u1"}"#))
        #expect(forger.last?.event == "bird:error")
        for _ in 0..<4 {
            fixture.advance(.seconds(1))
            fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: chattyID)
            fixture.hub.sweep()
        }
        signin(fixture, lateID, user: "u2")
        #expect(fixture.hub.connectionCount == 5, "nobody is closed before the deadline")
        fixture.advance(.seconds(1))
        fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: chattyID)
        fixture.hub.sweep()
        for output in [silent, chatty, forger] {
            #expect(output.closeCode == 4009)
            #expect(output.closeReason == "Unauthorized: signin required")
        }
        #expect(late.closeCode == nil && signed.closeCode == nil)
        #expect(fixture.hub.connectionCount == 2)
    }

    @Test("without the option nobody is closed for not signing in")
    func optional() {
        let fixture = fixture(deadline: nil)
        let (output, id) = fixture.connect()
        for _ in 0..<100 {
            fixture.advance(.seconds(10))
            fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: id)
            fixture.hub.sweep()
        }
        #expect(output.closeCode == nil)
    }

    @Test("the deadline counts from each connection's open")
    func perConnection() {
        let fixture = fixture(deadline: 10)
        let (early, _) = fixture.connect()
        fixture.advance(.seconds(6))
        let (later, _) = fixture.connect()
        fixture.advance(.seconds(4))
        fixture.hub.sweep()
        #expect(early.closeCode == 4009)
        #expect(later.closeCode == nil)
        fixture.advance(.seconds(6))
        fixture.hub.sweep()
        #expect(later.closeCode == 4009)
    }
}

/// The signin deadline over real sockets: the server's own sweep timer enforces it.
@Suite struct RealtimeServerSigninDeadlineTests {
    @Test("a real client that never signs in is closed with 4009 after the app's deadline")
    func deadline() throws {
        let strict = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", userAuthenticationTimeout: 1)
        let fixture = try ServerFixture(apps: [strict])
        let silent = try fixture.connect()
        let signed = try fixture.connect()
        let id = try #require(signed.socketID)
        let userData = #"{"id":"u1"}"#
        let auth = ChannelAuthorization(key: strict.key, secret: strict.secret).authorizeSignin(socketID: id, userData: userData)
        signed.send(try RealtimeMessage(event: "bird:signin", payload: SigninRequest(auth: auth, userData: userData)).text)
        #expect(signed.message("bird:signin_success") != nil)
        #expect(silent.closeCode(timeout: .seconds(5)) == 4009)
        signed.send(#"{"event":"bird:ping"}"#)
        #expect(signed.message("bird:pong") != nil)
        #expect(fixture.server.hub.connectionCount == 1)
    }
}
