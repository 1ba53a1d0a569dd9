import CCrypto

/// The few cryptographic primitives the protocol needs, from OpenSSL's libcrypto.
public enum Crypto {
    /// HMAC-SHA256 (RFC 2104, FIPS 180-4) of `message` under `key`.
    ///
    /// - Parameters:
    ///   - key: the secret, as UTF-8.
    ///   - message: the string to sign, as UTF-8.
    /// - Returns: the 32-byte MAC.
    public static func hmacSHA256(key: String, message: String) -> [UInt8] {
        hmacSHA256(key: key, message: Array(message.utf8))
    }

    /// HMAC-SHA256 (RFC 2104, FIPS 180-4) of `message`'s bytes as they are (a webhook's body,
    /// which need not be UTF-8) under `key`.
    ///
    /// - Parameters:
    ///   - key: the secret, as UTF-8.
    ///   - messageBytes: the bytes to sign.
    /// - Returns: the 32-byte MAC.
    public static func hmacSHA256(key: String, message messageBytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let keyBytes = Array(key.utf8)
        _ = keyBytes.withUnsafeBytes { keyBuffer in
            messageBytes.withUnsafeBufferPointer { messageBuffer in
                HMAC(EVP_sha256(), keyBuffer.baseAddress, Int32(keyBuffer.count), messageBuffer.baseAddress, messageBuffer.count, &output, &length)
            }
        }
        return Array(output.prefix(Int(length)))
    }

    /// MD5 (RFC 1321) of `bytes`: only for Pusher's `body_md5` parameter, not for security.
    ///
    /// - Parameter bytes: the data.
    /// - Returns: the 16-byte digest.
    public static func md5(_ bytes: [UInt8]) -> [UInt8] {
        digest(bytes, EVP_md5())
    }

    /// SHA-256 (FIPS 180-4) of `bytes`.
    ///
    /// - Parameter bytes: the data.
    /// - Returns: the 32-byte digest.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        digest(bytes, EVP_sha256())
    }

    /// Compares two byte strings in time independent of where they differ (`CRYPTO_memcmp`),
    /// so a signature check leaks nothing about a forged signature's correct prefix.
    ///
    /// - Returns: whether the two are equal (different lengths are unequal).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    /// Lower-case hexadecimal text of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let status = RAND_bytes(&bytes, Int32(count))
        precondition(status == 1, "RAND_bytes failed")
        return bytes
    }

    private static func digest(_ bytes: [UInt8], _ type: OpaquePointer?) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = bytes.withUnsafeBufferPointer { EVP_Digest($0.baseAddress, $0.count, &output, &length, type, nil) }
        return Array(output.prefix(Int(length)))
    }
}
