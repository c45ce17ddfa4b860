#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVStore
import CActorKVSys
import Synchronization

/// The event loop's accepting side: new connections admitted, refused (`-MAXCLIENTS`,
/// `-NOPERM`, out of descriptors) or paused, and the rights each is given.
extension EventLoop {
    func acceptAll() {
        while !draining && acceptPausedUntil == nil {
            let fd: Int32
            do {
                guard let accepted = try SocketCalls.accept(listener) else { return }
                fd = accepted
            } catch where error.code == EMFILE || error.code == ENFILE {
                guard refuseForWantOfDescriptors() else { return }
                continue
            } catch {
                log("accept failed: \(error); not accepting for 100 ms")
                pauseAccepting()
                return
            }
            if refusedForDescriptors > 0 {
                log("accepting connections again (\(refusedForDescriptors) refused for want of file descriptors)")
                refusedForDescriptors = 0
            }
            admit(fd)
        }
    }

    /// Out of descriptors with connections waiting: the listener is level-triggered, so leaving
    /// them there would spin the loop. The reserve descriptor is given up to accept one, which
    /// gets `-MAXCLIENTS` and is closed at once, then taken back. Without a reserve the listener
    /// pauses instead. Returns whether one was refused (and the next may be tried).
    private func refuseForWantOfDescriptors() -> Bool {
        if refusedForDescriptors == 0 {
            log("accept failed: out of file descriptors (open files limit); refusing new connections with -MAXCLIENTS until some close")
        }
        guard reserveFD >= 0 else { pauseAccepting(); return false }
        SocketCalls.close(reserveFD)
        defer { reserveFD = SocketCalls.openReserve() }
        switch Result(catching: { () throws(SocketCalls.Failure) in try SocketCalls.accept(listener) }) {
        case .success(let fd?):
            ErrorMapping.outOfDescriptors.encoded.withUnsafeBytes { _ = try? SocketCalls.send(fd, $0) }
            SocketCalls.close(fd)
            refusedForDescriptors += 1
            statistics.rejectedConnections.add(1, ordering: .relaxed)
            return true
        case .success(nil):
            return false  // nobody waiting any more
        case .failure:
            // Another thread took the freed descriptor first: pause rather than spin.
            pauseAccepting()
            return false
        }
    }

    /// Takes the listener out of epoll for a moment (accept keeps failing: no spinning on it).
    private func pauseAccepting() {
        guard acceptPausedUntil == nil else { return }
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, listener, 0, 0)
        acceptPausedUntil = monotonicSeconds() + 0.1
    }

    func resumeAcceptingIfDue() {
        guard let until = acceptPausedUntil, !draining, monotonicSeconds() >= until else { return }
        acceptPausedUntil = nil
        if reserveFD < 0 { reserveFD = SocketCalls.openReserve() }
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, listener, ACTORKV_EPOLLIN, Self.listenerToken)
    }

    private func admit(_ fd: Int32) {
        let peer = SocketCalls.peerCredentials(fd).map { PeerCredentials(uid: $0.uid, gid: $0.gid, pid: $0.pid, groups: SocketCalls.peerGroups(fd) ?? []) }
        if let refusal = refusal(for: fd, peer: peer) {
            statistics.rejectedConnections.add(1, ordering: .relaxed)
            refusal.encoded.withUnsafeBytes { _ = try? SocketCalls.send(fd, $0) }
            linger(fd, id: nextID)
            nextID += 1
            return
        }
        let id = nextID
        nextID += 1
        let connection = Connection(session: ClientSession(id: id, peer: peer, transactionLimit: configuration.protocolLimits.maxRequestBytes), fd: fd, limits: configuration.protocolLimits,
                                    outputLimit: configuration.maxOutputBytes, rights: rights(for: peer))
        guard actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, fd, Self.connectionEvents, id) == 0 else {
            SocketCalls.close(fd)
            return
        }
        connections[id] = connection
        processor.clients.add(connection.session)
        statistics.connectedClients.add(1, ordering: .relaxed)
        statistics.totalConnections.add(1, ordering: .relaxed)
        pump(connection)
    }

    private func refusal(for fd: Int32, peer: PeerCredentials?) -> Reply? {
        if connections.count >= configuration.maxClients { return ErrorMapping.maxClients }
        guard configuration.restrictsPeers || processor.access != nil else { return nil }
        guard let peer else { return ErrorMapping.notPermitted(because: "cannot read peer credentials") }
        let allowed = configuration.allows(uid: peer.uid, gid: peer.gid) { peer.groups }
        return allowed ? nil : ErrorMapping.notPermitted(uid: peer.uid, gid: peer.gid)
    }

    /// The namespace rights that judge a new connection's requests (nil: it has every right).
    private func rights(for peer: PeerCredentials?) -> ConnectionRights? {
        guard let access = processor.access, let identity = peer?.identity, !access.isOwner(identity) else { return nil }
        return ConnectionRights(access: access, peer: identity)
    }
}
