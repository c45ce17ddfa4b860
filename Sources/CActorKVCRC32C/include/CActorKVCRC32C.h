// CRC-32C with the CPU's own instruction (SSE 4.2 `crc32` on x86-64), which Swift cannot emit.
// ActorKVStore's CRC32C uses it when actorkv_crc32c_hardware() says the CPU has it, and its
// table-driven Swift code otherwise (other CPUs, other architectures).
#ifndef CACTORKVCRC32C_H
#define CACTORKVCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// 1 if actorkv_crc32c_update may be called on this CPU, else 0.
int actorkv_crc32c_hardware(void);

/// Feeds `count` bytes at `bytes` into the CRC-32C register `state` (the running value, not
/// inverted: callers start from ~0 and invert the result) and returns the new register.
/// Only valid when actorkv_crc32c_hardware() returned 1.
uint32_t actorkv_crc32c_update(uint32_t state, const void *bytes, size_t count);

#endif
