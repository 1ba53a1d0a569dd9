import Glibc
import Reachability
import Testing

@Suite struct HostReachabilityTests {
    let eth0 = NetworkInterface(name: "eth0", index: 2, kind: .wired, isAdminUp: true, hasCarrier: true, operState: .up)

    @Test("a host is reachable when any of its addresses is, and takes that path's flags")
    func anyAddress() {
        let v6 = NetworkPath(destination: IPAddress("2001:db8::7")!, lookup: .failed(errno: ENETUNREACH), interface: nil)
        let v4 = NetworkPath(
            destination: IPAddress("198.51.100.7")!,
            lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: IPAddress("192.0.2.1"))),
            interface: eth0
        )
        let value = HostReachability(host: .name("example.test"), paths: [v6, v4])
        #expect(value.isReachable)
        #expect(value.primaryPath == v4)
        #expect(value.flags == [.reachable])
        #expect(value.reason == nil)
    }

    @Test("an unreachable host reports the first path's reason")
    func firstReason() {
        let a = NetworkPath(destination: IPAddress("2001:db8::7")!, lookup: .failed(errno: EACCES), interface: nil)
        let b = NetworkPath(destination: IPAddress("198.51.100.7")!, lookup: .failed(errno: ENETUNREACH), interface: nil)
        let value = HostReachability(host: .name("example.test"), paths: [a, b])
        #expect(!value.isReachable)
        #expect(value.reason == .prohibited)
    }

    @Test("a resolution failure is the reason, with no paths")
    func resolutionFailure() {
        let error = ReachabilityError.resolutionFailed(host: "nowhere.invalid", code: -2, message: "Name or service not known")
        let value = HostReachability(host: .name("nowhere.invalid"), paths: [], resolutionError: error)
        #expect(value.flags == [])
        #expect(value.reason == .resolutionFailed("Name or service not known"))
    }

    @Test("the system resolver resolves localhost and fails cleanly for .invalid names")
    func systemResolver() throws {
        let addresses = try SystemHostResolver().resolve("localhost")
        #expect(addresses.contains(IPAddress("127.0.0.1")!))
        #expect(throws: ReachabilityError.self) { try SystemHostResolver().resolve("nowhere.invalid") }
    }
}
