#define _GNU_SOURCE 1
#include "CActorKVTestSys.h"
#include <fcntl.h>
#include <unistd.h>

int actorkv_test_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int actorkv_test_spawn_close_from(posix_spawn_file_actions_t *actions, int low) {
    return posix_spawn_file_actions_addclosefrom_np(actions, low);
}
