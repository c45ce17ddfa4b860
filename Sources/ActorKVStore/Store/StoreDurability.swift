extension Store {
    /// Whether every write acknowledged so far is on stable storage; with `waiting`, makes it so
    /// first, whatever the fsync policy (Redis's `WAITAOF 1 0`): the log of each open namespace
    /// that holds records not yet known durable is fsync'd, all of them at once, and this
    /// returns once they are. (A namespace that is not open was fsync'd when it closed.)
    ///
    /// Under `always` every acknowledged write is durable already, so this returns true without
    /// an fsync. It covers every connection's writes, not only one's: a true answer says that
    /// those of any caller are durable. Throws `durabilityLost` if an fsync fails.
    public func writtenIsDurable(waiting: Bool) async throws(StoreError) -> Bool {
        let pending = openNamespacesNow().compactMap { namespace -> (LogSyncer, UInt64)? in
            let written = namespace.syncer.writtenSequence
            return namespace.syncer.durableSequence < written ? (namespace.syncer, written) : nil
        }
        guard waiting, !pending.isEmpty else { return pending.isEmpty }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (syncer, written) in pending { group.addTask { try await syncer.waitDurable(written) } }
                try await group.waitForAll()
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.durabilityLost, "\(error)")
        }
        return true
    }
}
