import Reachability
import Testing

@Suite struct ReachabilityHostTests {
    @Test("literal addresses parse without resolution", arguments: [
        ("198.51.100.7", AddressFamily.ipv4, "198.51.100.7"),
        ("2001:db8::7", .ipv6, "2001:db8::7"),
        ("[2001:db8::7]", .ipv6, "2001:db8::7"),
        ("2001:0db8:0000::0007", .ipv6, "2001:db8::7"),
        ("::1", .ipv6, "::1"),
    ])
    func literals(text: String, family: AddressFamily, canonical: String) throws {
        let host = try ReachabilityHost(text)
        guard case .address(let address) = host else {
            Issue.record("\(text) was not taken as an address")
            return
        }
        #expect(address.family == family)
        #expect(address.description == canonical)
    }

    @Test("host names are validated and lower-cased", arguments: [
        ("Example.COM", "example.com"), ("localhost", "localhost"), ("a-b.example.", "a-b.example"),
        ("_srv.example.com", "_srv.example.com"),
    ])
    func names(text: String, name: String) throws {
        #expect(try ReachabilityHost(text) == .name(name))
    }

    @Test("malformed hosts throw invalidHost", arguments: [
        "", " ", ".", "exa mple.com", "example..com", "-example.com", "example-.com", "256.1.1.1",
        "1.2.3", "[198.51.100.7]", "[2001:db8::1", "host/path", "héllo.example", "a\u{0}b", "1.2.3.4\u{0}", "::1\u{0}x", "198.51.100.7\n",
        String(repeating: "a", count: 64) + ".com", String(repeating: "a.", count: 127) + "com",
    ])
    func malformed(text: String) {
        #expect {
            try ReachabilityHost(text)
        } throws: { error in
            guard case .invalidHost(let given, _) = error as? ReachabilityError else { return false }
            return given == text
        }
    }

    @Test("IPAddress rejects wrong byte counts and knows loopback and link-local")
    func addressProperties() {
        #expect(IPAddress(bytes: [1, 2, 3]) == nil)
        #expect(IPAddress("127.0.0.5")!.isLoopback)
        #expect(IPAddress("::1")!.isLoopback)
        #expect(!IPAddress("198.51.100.7")!.isLoopback)
        #expect(IPAddress("fe80::1")!.isLinkLocal)
        #expect(!IPAddress("2001:db8::1")!.isLinkLocal)
    }
}
