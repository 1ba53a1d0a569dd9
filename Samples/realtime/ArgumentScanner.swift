/// Walks a subcommand's arguments: options with values (`--name value`, `--name=value`),
/// flags, and positional arguments.
struct ArgumentScanner {
    private var arguments: [String]
    private var index = 0

    /// Creates a scanner over `arguments`.
    ///
    /// - Parameter arguments: the arguments after the subcommand.
    init(_ arguments: [String]) { self.arguments = arguments }

    /// The next argument, split into option name and inline value: `("--channel", "a")` for
    /// `--channel=a`, `("--json", nil)` for `--json`, `(nil, "x")` for the positional `x`;
    /// `nil` at the end.
    mutating func next() -> (option: String?, inline: String?)? {
        guard index < arguments.count else { return nil }
        let argument = arguments[index]
        index += 1
        guard argument.hasPrefix("--") else { return (nil, argument) }
        if let equals = argument.firstIndex(of: "=") {
            return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
        }
        return (argument, nil)
    }

    /// The value of `option`: its inline value, or else the next argument.
    ///
    /// - Parameters:
    ///   - option: the option's name, for the error message.
    ///   - inline: the inline value `next()` returned.
    /// - Throws: `UsageError` when there is no value or it is empty.
    mutating func value(of option: String, inline: String?) throws(UsageError) -> String {
        if let inline {
            guard !inline.isEmpty else { throw UsageError("\(option) needs a value") }
            return inline
        }
        guard index < arguments.count, !arguments[index].isEmpty, !arguments[index].hasPrefix("--") else {
            throw UsageError("\(option) needs a value")
        }
        defer { index += 1 }
        return arguments[index]
    }
}
