import Glibc

/// C strings handed to libwebsockets, freed together when the arena goes.
///
/// lws keeps some pointers from the structs it is given (a vhost's name and interface, the
/// protocol names, certificate paths) for as long as the vhost or context lives; others it
/// copies at once (client connect parameters go into the wsi's stash). One arena per
/// lifetime frees them at the right time on every path.
final class CStringArena {
    private var strings: [UnsafeMutablePointer<CChar>] = []

    /// A NUL-terminated copy of `string`, valid until the arena is freed.
    func copy(_ string: String) -> UnsafeMutablePointer<CChar> {
        guard let copy = strdup(string) else { fatalError("strdup: out of memory") }
        strings.append(copy)
        return copy
    }

    /// A copy of `string`, or nil when it is nil.
    func copy(_ string: String?) -> UnsafeMutablePointer<CChar>? {
        string.map { copy($0) }
    }

    deinit {
        for string in strings { free(string) }
    }
}
