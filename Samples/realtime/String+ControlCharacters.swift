extension String {
    /// The string with every control character (Unicode category Cc: C0, DEL and C1) written
    /// as a Swift-style `\u{1B}` escape, so text from the server cannot move the cursor,
    /// recolour the terminal or break a line in plain output. Other characters are kept.
    var escapingControlCharacters: String {
        var text = ""
        text.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if scalar.properties.generalCategory == .control {
                text += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return text
    }
}
