#define _GNU_SOURCE 1
#include "CActorKVSys.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

int actorkv_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int actorkv_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = token;
    return epoll_ctl(epfd, op, fd, &ev);
}

int actorkv_epoll_wait(int epfd, void *events, int capacity, int timeout_ms) {
    return epoll_wait(epfd, (struct epoll_event *)events, capacity, timeout_ms);
}

size_t actorkv_epoll_buffer_size(int capacity) { return sizeof(struct epoll_event) * (size_t)capacity; }
uint64_t actorkv_epoll_token(const void *events, int i) { return ((const struct epoll_event *)events)[i].data.u64; }
uint32_t actorkv_epoll_flags(const void *events, int i) { return ((const struct epoll_event *)events)[i].events; }

int actorkv_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int actorkv_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

int actorkv_peer_credentials(int fd, uint32_t *uid, uint32_t *gid, int32_t *pid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    *pid = cred.pid;
    return 0;
}

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

int actorkv_peer_groups(int fd, uint32_t *groups, int capacity, int *needed) {
    socklen_t len = (socklen_t)(capacity * (int)sizeof(gid_t));
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
    *needed = (int)(len / sizeof(gid_t));
    if (rc != 0) return -1;
    return (int)(len / sizeof(gid_t));
}
