// GNU extensions the tests' child-process runner needs and Swift's Glibc module does not export.
#ifndef CACTORKVTESTSYS_H
#define CACTORKVTESTSYS_H

#include <spawn.h>

/// pipe2(fds, O_CLOEXEC).
int actorkv_test_pipe_cloexec(int fds[2]);
/// posix_spawn_file_actions_addclosefrom_np: the child closes every descriptor from `low` up.
int actorkv_test_spawn_close_from(posix_spawn_file_actions_t *actions, int low);

#endif
