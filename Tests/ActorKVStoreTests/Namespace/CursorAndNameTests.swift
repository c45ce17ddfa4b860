import ActorKVStore
import ActorKVTestSupport
import Testing

@Suite("Scan cursors, namespace names, UTF-8 and base64 helpers")
struct CursorAndNameTests {
    @Test("cursors round-trip through their wire text", arguments: [
        [UInt8]([0x00]), [0xFF], [0xAB, 0xCD, 0x00, 0x10], b("hello"), [UInt8](repeating: 0x7F, count: 300),
    ])
    func cursorRoundTrip(key: [UInt8]) throws {
        let cursor = ScanCursor.after(key)
        #expect(cursor.text.first == UInt8(ascii: "k"))
        #expect(cursor.text.count == 1 + 2 * key.count)
        #expect(try ScanCursor(text: cursor.text) == cursor)
        #expect(cursor.afterKey == key)
    }

    @Test("the start cursor is 0 both ways")
    func startCursor() throws {
        #expect(ScanCursor.start.text == b("0"))
        #expect(try ScanCursor(text: b("0")) == .start)
        #expect(ScanCursor.start.afterKey == nil)
        #expect(ScanCursor.after([0xAB, 0x01]).text == b("kab01"))
    }

    @Test("invalid cursors are refused", arguments: ["", "k", "k0", "kabc", "kZZ", "kAB", "x00", "00", "k0g", "1", "k 0", "0 ", "kab\n"])
    func invalidCursor(text: String) {
        let error = storeErrorSync { _ = try ScanCursor(text: b(text)) }
        #expect(error?.code == .invalidCursor)
    }

    @Test("acceptable namespace names", arguments: ["a", "config", "A-b_c.d", "a..", "0", "user:1000", ":", "a:b:c", String(repeating: "x", count: 64)])
    func acceptedNames(name: String) throws {
        #expect(NamespaceName.problem(with: b(name)) == nil)
        #expect(try NamespaceName.validate(name) == name)
    }

    @Test("refused namespace names", arguments: ["", ".", "..", ".x", ".hidden", "a/b", "/a", "a b", "é", "a\u{0}b",
                                                 "ns\n", String(repeating: "x", count: 65)])
    func refusedNames(name: String) {
        #expect(NamespaceName.problem(with: b(name)) != nil)
        #expect(storeErrorSync { _ = try NamespaceName.validate(name) }?.code == .invalidNamespace)
    }

    @Test("a name's every byte is allowed exactly when it is one of A-Z a-z 0-9 . _ - :, each of the 256 values tried")
    func everyByteOfAName() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-:".utf8)
        for byte in UInt8.min...UInt8.max {
            // After an allowed first byte, so that a dot is judged as any other byte.
            let name: [UInt8] = [UInt8(ascii: "a"), byte, UInt8(ascii: "z")]
            #expect((NamespaceName.problem(with: name) == nil) == allowed.contains(byte), "byte 0x\(String(byte, radix: 16))")
        }
    }

    @Test("UTF-8 validation agrees with the standard library on random and edge inputs")
    func utf8Validator() {
        var rng = SeededGenerator(seed: 5)
        var inputs: [[UInt8]] = [[], [0xC2, 0x80], [0xC1, 0xBF], [0xE0, 0x9F, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                                 [0xF0, 0x90, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xE2, 0x82], [0x80], [0xF5, 0x80, 0x80, 0x80]]
        for _ in 0..<3000 {
            // Biased towards bytes that make multi-byte sequences.
            let n = Int.random(in: 0..<8, using: &rng)
            inputs.append((0..<n).map { _ in
                Bool.random(using: &rng) ? UInt8.random(in: 0x80...0xF5, using: &rng) : UInt8.random(in: 0...0xFF, using: &rng)
            })
        }
        for _ in 0..<3000 {
            // Longer, mostly ASCII (the validator skips ASCII eight bytes at a time), with a
            // byte of any value now and then, anywhere: at, before and after each eight.
            let n = Int.random(in: 0..<40, using: &rng)
            inputs.append((0..<n).map { _ in
                Int.random(in: 0..<12, using: &rng) == 0 ? UInt8.random(in: 0x80...0xFF, using: &rng) : UInt8.random(in: 0...0x7F, using: &rng)
            })
        }
        for bytes in inputs {
            let reference = String(validating: bytes, as: UTF8.self) != nil
            #expect(UTF8Validator.isValid(bytes) == reference, "\(bytes)")
        }
    }

    @Test("base64 agrees with Foundation-free reference vectors and refuses bad text")
    func base64() {
        let vectors: [(String, String)] = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
                                           ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            var out: [UInt8] = []
            Base64.encode(b(plain), into: &out)
            #expect(out == b(encoded))
            #expect(Base64.decode(b(encoded)) == b(plain))
        }
        var rng = SeededGenerator(seed: 9)
        for n in 0..<50 {
            let data = rng.bytes(n)
            var out: [UInt8] = []
            Base64.encode(data, into: &out)
            #expect(Base64.decode(out) == data)
        }
        for bad in ["Zg=", "Z===", "Zm9v!A==", "=Zg=", "Zg==Zg==", "Zm 9"] {
            #expect(Base64.decode(b(bad)) == nil, "\(bad)")
        }
    }
}
