// HINCRBYFLOAT's arithmetic in C's long double, as Redis does it, so that ActorKV's answers are
// Redis's digit for digit on the same machine (Swift has no long double on every platform).
// Pure functions of their bytes: no state, no allocation.
#ifndef CACTORKVLONGDOUBLE_H
#define CACTORKVLONGDOUBLE_H

#include <stddef.h>

/// The longest text of a long double these functions read or write (Redis's
/// MAX_LONG_DOUBLE_CHARS): a sum's text needs at most this many bytes.
enum { ACTORKV_LONG_DOUBLE_CHARS = 5120 };

/// What the functions below return for input they refuse (a length, when positive).
enum {
    /// The increment is not a number strtold reads whole (or has a leading space, or is NaN,
    /// or overflows, or underflows to 0, or is ACTORKV_LONG_DOUBLE_CHARS bytes or longer).
    ACTORKV_LONG_DOUBLE_BAD_INCREMENT = -1,
    /// The increment is infinite.
    ACTORKV_LONG_DOUBLE_INFINITE_INCREMENT = -2,
    /// The current value is not such a number.
    ACTORKV_LONG_DOUBLE_BAD_VALUE = -3,
    /// The sum is NaN or infinite.
    ACTORKV_LONG_DOUBLE_BAD_SUM = -4,
};

/// 0 if `increment` (`length` bytes) is an increment `actorkv_long_double_add` takes, else
/// ACTORKV_LONG_DOUBLE_BAD_INCREMENT or ACTORKV_LONG_DOUBLE_INFINITE_INCREMENT.
int actorkv_long_double_check_increment(const char *increment, size_t length);

/// `value` (NULL: absent, which counts as 0) plus `increment`, written into `out` (at least
/// ACTORKV_LONG_DOUBLE_CHARS bytes) as "%.17Lf" with the zeros after the point, and then a
/// bare point, removed, and "-0" written "0". Returns the sum's length, or one of the
/// ACTORKV_LONG_DOUBLE_* errors (checked in that order: increment, value, sum).
int actorkv_long_double_add(const char *value, size_t value_length, const char *increment, size_t increment_length, char *out);

#endif
