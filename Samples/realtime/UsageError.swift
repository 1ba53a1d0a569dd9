/// A command line that cannot be run: one line for standard error, exit status 1.
struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, for example `--subscribe needs a value`.
    var message: String

    /// Creates an error.
    ///
    /// - Parameter message: what is wrong.
    init(_ message: String) { self.message = message }

    /// The message.
    var description: String { message }
}
