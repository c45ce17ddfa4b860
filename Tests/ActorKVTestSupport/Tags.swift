import Foundation
import Testing

extension Tag {
    /// A suite that takes long (seconds to a minute on its own: kill -9 crash loops of child
    /// processes). The full run (`swift test`) runs it; the quick inner loop
    /// (`ACTORKV_QUICK=1 swift test`) skips it, through ``Trait/skippedWhenQuick``.
    ///
    /// This toolchain's `swift test --skip` matches test names only, not tags (`--skip tag:slow`
    /// skips nothing), hence the environment variable.
    @Tag public static var slow: Self
}

/// Whether this run is the quick inner loop: `ACTORKV_QUICK=1` in the environment.
public var isQuickRun: Bool { ProcessInfo.processInfo.environment["ACTORKV_QUICK"] == "1" }

extension Trait where Self == ConditionTrait {
    /// Skips the suite in the quick inner loop (``isQuickRun``); every other run runs it. Goes
    /// with the tag ``Tag/slow``.
    public static var skippedWhenQuick: Self {
        .enabled(if: !isQuickRun, "a slow suite, skipped by the quick loop (ACTORKV_QUICK=1)")
    }
}
