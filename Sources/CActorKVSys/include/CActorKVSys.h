// Linux facilities that Swift's Glibc module does not export: epoll, eventfd, accept4 without an
// address, and SO_PEERCRED. Thin C functions; the Swift side wraps them in SocketCalls.swift.
#ifndef CACTORKVSYS_H
#define CACTORKVSYS_H

#include <stdint.h>
#include <stddef.h>

#define ACTORKV_EPOLLIN 0x001u
#define ACTORKV_EPOLLOUT 0x004u
#define ACTORKV_EPOLLERR 0x008u
#define ACTORKV_EPOLLHUP 0x010u
#define ACTORKV_EPOLLRDHUP 0x2000u
#define ACTORKV_EPOLLET (1u << 31)
#define ACTORKV_EPOLL_CTL_ADD 1
#define ACTORKV_EPOLL_CTL_DEL 2
#define ACTORKV_EPOLL_CTL_MOD 3

/// epoll_create1(EPOLL_CLOEXEC).
int actorkv_epoll_create(void);
/// epoll_ctl with the token stored in data.u64.
int actorkv_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token);
/// epoll_wait into an internal array of `capacity` events; read them back with the two getters.
int actorkv_epoll_wait(int epfd, void *events, int capacity, int timeout_ms);
/// Bytes needed for `capacity` events.
size_t actorkv_epoll_buffer_size(int capacity);
uint64_t actorkv_epoll_token(const void *events, int i);
uint32_t actorkv_epoll_flags(const void *events, int i);
/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC).
int actorkv_eventfd(void);
/// accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC).
int actorkv_accept(int fd);
/// The peer's uid, gid and pid of a connected Unix socket; 0, or -1 with errno set.
int actorkv_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid);

/// The supplementary groups of a connected Unix socket's peer (SO_PEERGROUPS, Linux 4.13+), as
/// they were when it connected: the count written to `groups` (at most `capacity`), or -1 with
/// errno set (ERANGE: `*needed` holds the count required).
int actorkv_peer_groups(int fd, uint32_t *groups, int capacity, int *needed);

#endif
