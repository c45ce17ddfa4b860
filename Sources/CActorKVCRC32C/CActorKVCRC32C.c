#include "CActorKVCRC32C.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

int actorkv_crc32c_hardware(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2")))
uint32_t actorkv_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint64_t wide = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);  // unaligned load
        wide = __builtin_ia32_crc32di(wide, word);
        p += 8;
        count -= 8;
    }
    uint32_t c = (uint32_t)wide;
    while (count > 0) {
        c = __builtin_ia32_crc32qi(c, *p++);
        count--;
    }
    return c;
}

#else

int actorkv_crc32c_hardware(void) { return 0; }

uint32_t actorkv_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return state;  // never called: actorkv_crc32c_hardware() is 0
}

#endif
