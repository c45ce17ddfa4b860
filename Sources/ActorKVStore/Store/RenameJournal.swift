#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file `<data-dir>/.rename-journal`: a rename of a namespace under way
/// (``Store/renameNamespace(_:to:replacing:)``), or a copy (``Store/copyNamespace(_:to:replacing:)``,
/// a rename that keeps its source). Written, durably, once the target's new directory is
/// complete under a hidden name; from then on the rename or copy has happened, and a server
/// stopped before it is finished finishes it at its next start (``finish(in:system:log:)``),
/// each of its steps being one that can be taken again.
struct RenameJournal: Equatable, Sendable {
    static let fileName = ".rename-journal"
    /// The prefix of the hidden name the target's new directory is written under (a copy's too).
    static let stagedPrefix = ".renaming-"

    /// The namespace renamed (or copied).
    let source: String
    /// Its new name (the copy's).
    let target: String
    /// The hidden directory (in the data directory) holding the target's new files.
    let staged: String
    /// A copy: the source stays.
    var keepsSource = false

    /// The file's text.
    var text: String { "actorkv \(verb) namespace \(source) to \(target) from \(staged)\n" }

    private var verb: String { keepsSource ? "copies" : "renames" }

    /// The journal the bytes hold, or nil unless they are exactly a journal's text.
    static func parse(_ bytes: [UInt8]) -> RenameJournal? {
        guard bytes.last == UInt8(ascii: "\n") else { return nil }
        let words = bytes.dropLast().split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard words.count == 8, words[0] == "actorkv", words[1] == "renames" || words[1] == "copies", words[2] == "namespace", words[4] == "to",
              words[6] == "from", NamespaceName.problem(with: Array(words[3].utf8)) == nil,
              NamespaceName.problem(with: Array(words[5].utf8)) == nil, words[3] != words[5],
              words[7].hasPrefix(stagedPrefix), !words[7].contains("/") else { return nil }
        let journal = RenameJournal(source: words[3], target: words[5], staged: words[7], keepsSource: words[1] == "copies")
        return journal.text.utf8.elementsEqual(bytes) ? journal : nil
    }

    /// Writes the journal into the data directory `directory`, durably: a temporary file written
    /// and fsync'd, renamed into place, and the directory fsync'd.
    func write(directory: String, system: SystemCalls) throws(StoreError) {
        let path = directory + "/" + Self.fileName
        do { try system.replaceDurably(path, with: text, directory: directory) } catch {
            throw StoreError.io("writing", path, error)
        }
    }

    /// Takes the rename's steps that are not taken yet, in order: the target's old directory
    /// renamed away (hidden, for ``Store/deleteRemovedLeftovers(in:system:log:)``), the staged
    /// directory renamed to the target, the source renamed away (not for a copy); the data directory fsync'd;
    /// the journal deleted and the directory fsync'd again. Whether the staged directory is
    /// still there tells whether the target is the old one or already the new one.
    /// Returns the hidden paths the old directories were renamed to, to be deleted.
    @discardableResult
    func takeSteps(directory: String, system: SystemCalls) throws(StoreError) -> [String] {
        let staging = directory + "/" + staged, targetPath = directory + "/" + target, sourcePath = directory + "/" + source
        var hidden: [String] = []
        do throws(Errno) {
            if try SystemCalls.linkStatus(staging) != nil {
                if try SystemCalls.linkStatus(targetPath) != nil {
                    hidden.append(Self.hiddenPath(directory, target))
                    try system.rename(targetPath, hidden[hidden.count - 1])
                }
                try system.rename(staging, targetPath)
            }
            if !keepsSource, try SystemCalls.linkStatus(sourcePath) != nil {
                hidden.append(Self.hiddenPath(directory, source))
                try system.rename(sourcePath, hidden[hidden.count - 1])
            }
            try system.fsyncDirectory(directory)
            try system.unlink(directory + "/" + Self.fileName)
            try system.fsyncDirectory(directory)
        } catch {
            throw StoreError.io("\(keepsSource ? "copying" : "renaming") namespace \(source) to \(target) in", directory, error)
        }
        return hidden
    }

    /// At a store's start: finishes the rename a journal in `directory` names (the server stopped
    /// before it was done), and deletes a staged directory that no journal names (the server
    /// stopped before the rename happened). Throws `corrupt` for a journal that does not read.
    static func finish(in directory: String, system: SystemCalls, log: @Sendable (String) -> Void) throws(StoreError) {
        let journal = try pending(in: directory)
        if let read = journal {
            try read.takeSteps(directory: directory, system: system)
            log("finished \(read.keepsSource ? "copying" : "renaming") namespace \(read.source) to \(read.target), begun before the server stopped")
        }
        Store.deleteHiddenDirectories(in: directory, prefix: stagedPrefix, keeping: journal?.staged, system: system, log: log,
                                      what: "the files of a rename or copy of a namespace that the server stopped before")
    }

    /// The journal in data directory `directory`, if there is one; throws `corrupt` for one that
    /// does not read, as a start would.
    static func pending(in directory: String) throws(StoreError) -> RenameJournal? {
        let path = directory + "/" + fileName
        guard try exists(path) else { return nil }
        let window = try FileWindow(path: path, capacity: 512, system: .plain)
        guard let journal = parse(Array(window.bytes)) else {
            throw StoreError(.corrupt, "\(path) does not hold a rename or copy of a namespace (\(String(decoding: window.bytes, as: UTF8.self).debugDescription)): a rename was cut short, and which namespace holds what cannot be told; look at the directories it names, remove it, and restart")
        }
        return journal
    }

    /// Where each namespace's files will be once the rename is finished, from where they are
    /// (`paths`, name to directory), without touching them: the staged directory, if it is still
    /// there, as the target's; the source gone (but for a copy).
    func applied(to paths: inout [String: String], directory: String) throws(StoreError) {
        if try Self.exists(directory + "/" + staged) { paths[target] = directory + "/" + staged }
        if !keepsSource { paths[source] = nil }
    }

    /// A new hidden name to stage namespace `target`'s directory under.
    static func stagedName(for target: String) -> String {
        stagedPrefix + target + "-" + String(UInt32.random(in: .min ... .max), radix: 16)
    }

    /// A hidden name for a directory taken away, which the next start deletes if nothing else does.
    static func hiddenPath(_ directory: String, _ name: String) -> String {
        directory + "/" + Store.removedPrefix + name + "-" + String(UInt32.random(in: .min ... .max), radix: 16)
    }

    private static func exists(_ path: String) throws(StoreError) -> Bool {
        do { return try SystemCalls.linkStatus(path) != nil } catch { throw StoreError.io("reading", path, error) }
    }
}
