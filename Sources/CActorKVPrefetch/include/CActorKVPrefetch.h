// Cache prefetch hints for the B+tree walk (OrderedMap), which Swift cannot express itself.
// Header-only: the functions are static inline, so the optimizer inlines them into the walk.
#ifndef CACTORKVPREFETCH_H
#define CACTORKVPREFETCH_H

#include <stddef.h>
#include <stdint.h>

/// Asks the CPU to start loading the cache lines of `count` bytes at `start` for reading.
/// A hint only: it never faults and changes no memory, whatever the address.
static inline void actorkv_prefetch(const void *start, size_t count) {
    uintptr_t line = (uintptr_t)start & ~(uintptr_t)63;
    uintptr_t end = (uintptr_t)start + count;
    for (; line < end; line += 64) __builtin_prefetch((const void *)line, 0, 3);
}

#endif
