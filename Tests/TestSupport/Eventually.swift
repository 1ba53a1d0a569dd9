/// Waits up to `timeout` for `condition`, checking every 10 ms: for what arrives over real
/// sockets, never as a timing assertion.
///
/// - Returns: whether `condition` held before the time ran out.
public func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return condition() }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}
