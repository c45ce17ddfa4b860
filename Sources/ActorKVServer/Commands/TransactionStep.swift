import ActorKVProtocol
import ActorKVStore

/// How a queued data command takes part in EXEC's one batch: how many steps it adds (which
/// ``appendSteps(of:to:)`` appends) and how its reply is made from their outcomes. Only
/// commands on single keys qualify: a read of one key, a write of one or more.
struct TransactionStep: Sendable {
    /// How many of EXEC's batch steps are the command's (``appendSteps(of:to:)`` appends them).
    let stepCount: Int
    /// How the command's reply is made from its steps' outcomes (a kind, not a closure: a
    /// closure's context would be an allocation per queued command).
    private let kind: ReplyKind

    private enum ReplyKind: Sendable {
        /// The one step's outcome as `operation`'s own reply, in `shape`.
        case value(Operation, ReplyShape)
        /// `+OK`.
        case stored
        /// The sum of the steps' counts.
        case sumOfCounts
        /// The one step's outcome as is (an INCR's new value).
        case outcome
        /// How many of the steps found a value (EXISTS).
        case found
        /// Each step's value, in order (HMGET).
        case values
        /// The steps' outcomes as one batch's, in `shape` (HGETDEL).
        case shaped(ReplyShape)
        /// Of a change of one key's deadline: 1 if it was set, removed or the key deleted, else
        /// 0 (PEXPIRE, PERSIST).
        case expiryCount
        /// Of one key's deadline: the milliseconds left, -1 without one, -2 absent (PTTL).
        case millisecondsLeft
    }

    /// The command's reply from its steps' `outcomes` (``stepCount`` of them, in order).
    func reply(_ outcomes: ArraySlice<Outcome>) -> Reply {
        switch kind {
        case .value(let operation, let shape): return KeyValueCommands.reply(for: outcomes[outcomes.startIndex], of: operation, shape: shape)
        case .stored: return .simple("OK")
        case .sumOfCounts: return .integer(KeyValueCommands.sumOfCounts(outcomes))
        case .outcome: return KeyValueCommands.reply(for: outcomes[outcomes.startIndex])
        case .found: return .integer(Int64(outcomes.filter { $0 != .value(nil) }.count))
        case .values: return .array(outcomes.map(KeyValueCommands.reply(for:)))
        case .shaped(let shape): return KeyValueCommands.reply(for: .batch(Array(outcomes)), ofBatch: true, shape: shape)
        case .expiryCount, .millisecondsLeft:
            guard case .batch(let results) = outcomes[outcomes.startIndex], case .integer(let n)? = results.first else {
                return KeyValueCommands.reply(for: outcomes[outcomes.startIndex])
            }
            if case .expiryCount = kind { return .integer(n == KeyExpiry.Result.changed.rawValue || n == KeyExpiry.Result.deleted.rawValue ? 1 : 0) }
            guard n > 0 else { return .integer(Int64(n)) }
            return .integer(Int64(n) - min(Int64(n), Int64(clamping: WallClock.milliseconds())))
        }
    }

    /// The plan of `operation` (with reply `shape`), or nil if it cannot be part of a
    /// transaction (SCAN's pages, conditional puts, a connection's keys, guarded BATCHes).
    static func plan(for operation: Operation, shape: ReplyShape) -> TransactionStep? {
        switch operation {
        case .get, .count: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .scan where isWholeNamespace(shape), .packedEntries: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .put: return TransactionStep(stepCount: 1, kind: .stored)
        case .set: return TransactionStep(stepCount: 1, kind: .sumOfCounts)
        case .increment: return TransactionStep(stepCount: 1, kind: .outcome)
        case .delete(let keys): return TransactionStep(stepCount: keys.count, kind: .sumOfCounts)
        case .exists(let keys): return TransactionStep(stepCount: keys.count, kind: .found)
        case .getMany(let keys): return TransactionStep(stepCount: keys.count, kind: .values)
        case .batch(let steps) where shape == .added: return TransactionStep(stepCount: steps.count, kind: .sumOfCounts)
        case .batch(let steps) where shape == .stored: return TransactionStep(stepCount: steps.count, kind: .stored)
        case .batch(let steps) where shape == .updatedValue && steps.count == 1: return TransactionStep(stepCount: 1, kind: .outcome)
        case .batch(let steps) where shape == .takenValues: return TransactionStep(stepCount: steps.count, kind: .shaped(shape))
        case .expire, .deadlines, .sample: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .setAll: return TransactionStep(stepCount: 1, kind: .outcome)
        case .lifetimePut(let put) where put.owner == 0 && put.ifVersion == nil: return TransactionStep(stepCount: 1, kind: .stored)
        case .setTimeToLive: return TransactionStep(stepCount: 1, kind: .expiryCount)
        case .timeToLive: return TransactionStep(stepCount: 1, kind: .millisecondsLeft)
        case .setNamespaceDeadline: return TransactionStep(stepCount: 1, kind: .outcome)
        case .namespaceDeadline: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .batch, .getVersioned, .conditionalPut, .update, .lifetimePut, .scan, .memoryUsage:
            return nil
        }
    }

    /// Whether `shape` is that of a command reading a whole namespace (HGETALL, HKEYS, HVALS),
    /// whose scan is a read step of EXEC's batch; SCAN's pages are not.
    private static func isWholeNamespace(_ shape: ReplyShape) -> Bool {
        switch shape {
        case .hashEntries, .hashKeys, .hashValues: return true
        case .plain, .added, .length, .keyType, .nonEmpty, .positiveOrNull, .stored, .updatedValue, .takenValues, .secondsLeft, .millisecondsLeft, .secondsDeadline,
             .millisecondsDeadline, .randomKey, .randomKeys, .randomEntries:
            return false
        }
    }

    /// What a queued command is counted besides its keys and values: about what the server holds
    /// for it until EXEC (its operation, plan and namespace, measured at 200-250 bytes).
    static let commandOverhead = 256

    /// About what queued `operation` holds until EXEC: its keys' and values' bytes, and
    /// ``commandOverhead`` (also per key past the first of a multi-key one).
    static func weight(of operation: Operation) -> Int {
        switch operation {
        case .get(let key): return commandOverhead + key.count
        case .put(let key, let value), .set(let key, let value): return commandOverhead + key.count + value.count
        case .increment(let key, _): return commandOverhead + key.count
        case .delete(let keys): return keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .exists(let keys), .getMany(let keys): return keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .batch(let steps): return steps.reduce(0) { $0 + commandOverhead + weight(of: $1) }
        case .expire(let expiry): return expiry.keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .deadlines(let keys): return keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .setAll(let setting): return zip(setting.keys, setting.values).reduce(0) { $0 + commandOverhead + $1.0.count + $1.1.count }
        case .lifetimePut(let put): return commandOverhead + put.key.count + put.value.count
        case .setTimeToLive(let key, _), .timeToLive(let key): return commandOverhead + key.count
        case .getVersioned, .conditionalPut, .update, .count, .memoryUsage, .scan, .sample, .packedEntries, .setNamespaceDeadline,
             .namespaceDeadline:
            return commandOverhead
        }
    }

    /// A batch step's keys and values, in bytes.
    private static func weight(of step: BatchStep) -> Int {
        switch step {
        case .put(let key, let value), .set(let key, let value), .setIfAbsent(let key, let value): return key.count + value.count
        case .delete(let key), .update(let key, _), .ifVersion(let key, _), .increment(let key, _): return key.count
        case .unchangedSince, .read, .setNamespaceDeadline: return 0
        case .expire, .deadlines: return step.keys.reduce(0) { $0 + $1.count }
        case .setAll(let setting): return zip(setting.keys, setting.values).reduce(0) { $0 + $1.0.count + $1.1.count }
        }
    }

    /// Appends the steps of `operation`, which has a ``plan(for:shape:)``, to EXEC's batch.
    static func appendSteps(of operation: Operation, to steps: inout [BatchStep]) {
        switch operation {
        case .get(let key): steps.append(.update(key: Array(key), .keep))
        case .put(let key, let value): steps.append(.put(key: Array(key), value: Array(value)))
        case .set(let key, let value): steps.append(.set(key: Array(key), value: Array(value)))
        case .increment(let key, let delta): steps.append(.increment(key: key, by: delta))
        case .delete(let keys): for key in keys { steps.append(.delete(key: key)) }
        case .exists(let keys), .getMany(let keys): for key in keys { steps.append(.update(key: Array(key), .keep)) }
        case .batch(let batch): steps += batch
        case .count: steps.append(.read(.count))
        case .scan, .packedEntries: steps.append(.read(.entries))
        case .sample(let draw): steps.append(.read(.sample(draw)))
        case .expire(let expiry): steps.append(.expire(expiry))
        case .deadlines(let keys): steps.append(.deadlines(keys))
        case .setAll(let setting): steps.append(.setAll(setting))
        case .lifetimePut(let put):
            let deadline: KeySetting.Deadline = put.milliseconds == 0 ? .none : .after(milliseconds: put.milliseconds)
            steps.append(.setAll(KeySetting(keys: [put.key], values: [Array(put.value)], deadline: deadline)))
        case .setTimeToLive(let key, let milliseconds):
            let deadline: KeyExpiry.Deadline = milliseconds.map { .after(milliseconds: UInt64(max(0, $0))) } ?? .none
            steps.append(.expire(KeyExpiry(keys: [key], deadline: deadline)))
        case .timeToLive(let key): steps.append(.deadlines([key]))
        case .setNamespaceDeadline(let change): steps.append(.setNamespaceDeadline(change))
        case .namespaceDeadline: steps.append(.read(.deadline))
        case .getVersioned, .conditionalPut, .update, .memoryUsage:
            preconditionFailure("TransactionStep: \(operation) has no steps in a transaction")
        }
    }
}
