/// The version of this build: the one source of what `actorkvd --version`, `actorkv --version`,
/// INFO (`actorkv_version`) and HELLO (`version`) say.
public enum ActorKVVersion {
    /// "major.minor.patch".
    public static let string = "0.1.0"
}
