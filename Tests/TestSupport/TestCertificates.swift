import Foundation
import Glibc
import class Spawn.ChildProcess

/// Certificates made at test time with the `openssl` command (Debian's `openssl`, installed by
/// `scripts/setup`): a CA of its own (P-256, valid two days) and server certificates it signs,
/// in a new temporary directory removed at the end.
public final class TestCertificates: Sendable {
    /// An `openssl` command or the directory failed.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed.
        public let description: String
        /// Creates a failure.
        public init(description: String) { self.description = description }
    }

    /// A certificate and its key, PEM files.
    public struct Pair: Sendable {
        /// The certificate's path.
        public let certificate: String
        /// The private key's path.
        public let key: String
    }

    /// Where the files are.
    public let directory: String
    /// The CA's certificate: the file a client trusts.
    public let caFile: String
    private let caKey: String

    /// Makes a CA named `name`.
    public init(name: String = "Test CA") throws {
        var template = Array("/tmp/test-certificates-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        caFile = directory + "/ca.crt"
        caKey = directory + "/ca.key"
        try Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", caKey, "-out", caFile, "-days", "2", "-subj", "/CN=\(name)",
        ])
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A server certificate for `dnsName` (its subjectAltName, RFC 6125), signed by this CA.
    ///
    /// - Parameter dnsName: the name the certificate is for.
    /// - Returns: the certificate's and key's paths.
    public func server(_ dnsName: String) throws -> Pair {
        let base = directory + "/" + dnsName
        let pair = Pair(certificate: base + ".crt", key: base + ".key")
        try Self.openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", pair.key, "-out", base + ".csr", "-subj", "/CN=\(dnsName)",
        ])
        try "subjectAltName=DNS:\(dnsName)\nbasicConstraints=CA:FALSE\n".write(toFile: base + ".ext", atomically: true, encoding: .utf8)
        try Self.openssl([
            "x509", "-req", "-in", base + ".csr", "-CA", caFile, "-CAkey", caKey, "-CAcreateserial",
            "-out", pair.certificate, "-days", "2", "-extfile", base + ".ext",
        ])
        return pair
    }

    /// Debian's `openssl`.
    public static let opensslPath = "/usr/bin/openssl"

    private static func openssl(_ arguments: [String]) throws {
        let result = try ChildProcess.run(opensslPath, arguments, timeout: .seconds(20))
        guard result.termination == .exited(0) else {
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) failed: \(result.standardError)")
        }
    }
}
