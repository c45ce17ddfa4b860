/// Splits an inline request line into arguments, as Redis's `sdssplitargs` does.
///
/// - Before a word, any C whitespace (space, \t, \n, \v, \f, \r) is skipped.
/// - An unquoted word ends only at a space, \t, \n or \r: \v and \f inside a word are part of it.
/// - `"double quoted"` words understand `\n \r \t \b \a \\ \" \xHH`; any other `\c` is `c`,
///   and a `\x` not followed by two hex digits is the literal characters.
/// - `'single quoted'` words are literal except `\'`.
/// - A quote may start in the middle of a word (`ab"c d"` is `abc d`); the closing quote ends the
///   word and must be followed by C whitespace (\v and \f included) or the end of the line.
/// - Unlike the C original, a NUL byte is an ordinary character, not the end of the line.
///
/// The request limits apply as they do to a multibulk request: more than `maxArguments` words,
/// or a word (after unquoting) longer than `maxBulkLength`, is a framing error.
enum InlineSplitter {
    /// The arguments of `line` (which excludes the line terminator); an empty or all-whitespace
    /// line gives none. Throws ``ProtocolError/unbalancedQuotes``,
    /// ``ProtocolError/tooManyInlineArguments(limit:)`` or
    /// ``ProtocolError/inlineArgumentTooBig(_:limit:)`` for the first problem found, reading from
    /// the left.
    static func split(
        _ line: UnsafeBufferPointer<UInt8>, limits: ProtocolLimits
    ) throws(ProtocolError) -> [[UInt8]] {
        var arguments: [[UInt8]] = []
        var index = 0
        while true {
            while index < line.count && ASCII.isSpace(line[index]) { index += 1 }
            guard index < line.count else { return arguments }
            guard arguments.count < limits.maxArguments else { throw .tooManyInlineArguments(limit: limits.maxArguments) }
            let start = index
            while index < line.count && isPlainWordByte(line[index]) { index += 1 }
            var word = Array(UnsafeBufferPointer(rebasing: line[start..<index]))
            if index < line.count && (line[index] == ASCII.doubleQuote || line[index] == ASCII.singleQuote) {
                guard let end = readQuoted(line, at: index, into: &word) else { throw .unbalancedQuotes }
                index = end
            }
            guard word.count <= limits.maxBulkLength else { throw .inlineArgumentTooBig(word.count, limit: limits.maxBulkLength) }
            arguments.append(word)
        }
    }

    /// True for a byte that neither ends an unquoted word nor opens a quote.
    @inline(__always)
    private static func isPlainWordByte(_ byte: UInt8) -> Bool {
        !ASCII.endsWord(byte) && byte != ASCII.doubleQuote && byte != ASCII.singleQuote
    }

    /// Reads the quoted section whose opening quote is at `index`; returns the index just past
    /// its closing quote, or nil for unbalanced quotes.
    private static func readQuoted(
        _ line: UnsafeBufferPointer<UInt8>, at index: Int, into word: inout [UInt8]
    ) -> Int? {
        line[index] == ASCII.doubleQuote
            ? readDoubleQuoted(line, from: index + 1, into: &word)
            : readSingleQuoted(line, from: index + 1, into: &word)
    }

    /// Reads a double-quoted section whose body starts at `start`; returns the index past the
    /// closing quote, or nil if it is missing or followed by a byte other than C whitespace.
    private static func readDoubleQuoted(
        _ line: UnsafeBufferPointer<UInt8>, from start: Int, into word: inout [UInt8]
    ) -> Int? {
        var index = start
        while index < line.count {
            let byte = line[index]
            if byte == ASCII.doubleQuote {
                return closingQuoteEnd(line, at: index)
            }
            if byte == ASCII.backslash && index + 1 < line.count {
                index = readEscape(line, at: index, into: &word)
            } else {
                word.append(byte)
                index += 1
            }
        }
        return nil
    }

    /// Decodes the escape whose backslash is at `index` (a next byte exists); returns the index
    /// after it.
    private static func readEscape(
        _ line: UnsafeBufferPointer<UInt8>, at index: Int, into word: inout [UInt8]
    ) -> Int {
        let escaped = line[index + 1]
        if escaped == ASCII.lowerX, index + 3 < line.count,
           let high = ASCII.hexValue(line[index + 2]), let low = ASCII.hexValue(line[index + 3]) {
            word.append(high << 4 | low)
            return index + 4
        }
        switch escaped {
        case UInt8(ascii: "n"): word.append(ASCII.lf)
        case UInt8(ascii: "r"): word.append(ASCII.cr)
        case UInt8(ascii: "t"): word.append(ASCII.tab)
        case UInt8(ascii: "b"): word.append(8)
        case UInt8(ascii: "a"): word.append(7)
        default: word.append(escaped)
        }
        return index + 2
    }

    /// Reads a single-quoted section whose body starts at `start`; returns the index past the
    /// closing quote, or nil if it is missing or followed by a byte other than C whitespace.
    private static func readSingleQuoted(
        _ line: UnsafeBufferPointer<UInt8>, from start: Int, into word: inout [UInt8]
    ) -> Int? {
        var index = start
        while index < line.count {
            let byte = line[index]
            if byte == ASCII.backslash && index + 1 < line.count && line[index + 1] == ASCII.singleQuote {
                word.append(ASCII.singleQuote)
                index += 2
            } else if byte == ASCII.singleQuote {
                return closingQuoteEnd(line, at: index)
            } else {
                word.append(byte)
                index += 1
            }
        }
        return nil
    }

    /// The index after the closing quote at `index`, or nil if a byte other than C whitespace
    /// follows it.
    @inline(__always)
    private static func closingQuoteEnd(_ line: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        let next = index + 1
        guard next == line.count || ASCII.isSpace(line[next]) else { return nil }
        return next
    }
}
