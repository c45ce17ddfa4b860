#include "CActorKVLongDouble.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Reads `length` bytes as one long double, the whole text and nothing else: 0 and *number set,
// or -1 (empty, too long, a leading space, anything strtold does not read, a NUL inside, NaN,
// an overflow, an underflow to 0).
static int read_long_double(const char *text, size_t length, long double *number) {
    char buffer[ACTORKV_LONG_DOUBLE_CHARS];
    if (length == 0 || length >= sizeof(buffer)) return -1;
    memcpy(buffer, text, length);
    buffer[length] = '\0';
    if (isspace((unsigned char)buffer[0])) return -1;
    errno = 0;
    char *end = NULL;
    long double value = strtold(buffer, &end);
    if (end != buffer + length || isnan(value)) return -1;
    if (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) return -1;
    *number = value;
    return 0;
}

// Reads an increment: 0 and *number set, or one of the ACTORKV_LONG_DOUBLE_* errors.
static int read_increment(const char *increment, size_t length, long double *number) {
    if (read_long_double(increment, length, number) != 0) return ACTORKV_LONG_DOUBLE_BAD_INCREMENT;
    if (isinf(*number)) return ACTORKV_LONG_DOUBLE_INFINITE_INCREMENT;
    return 0;
}

int actorkv_long_double_check_increment(const char *increment, size_t length) {
    long double number;
    return read_increment(increment, length, &number);
}

int actorkv_long_double_add(const char *value, size_t value_length, const char *increment, size_t increment_length, char *out) {
    long double delta = 0, current = 0;
    int problem = read_increment(increment, increment_length, &delta);
    if (problem != 0) return problem;
    if (value != NULL && read_long_double(value, value_length, &current) != 0) return ACTORKV_LONG_DOUBLE_BAD_VALUE;
    long double sum = current + delta;
    if (isnan(sum) || isinf(sum)) return ACTORKV_LONG_DOUBLE_BAD_SUM;
    int length = snprintf(out, ACTORKV_LONG_DOUBLE_CHARS, "%.17Lf", sum);
    if (length < 0 || length >= ACTORKV_LONG_DOUBLE_CHARS) return ACTORKV_LONG_DOUBLE_BAD_SUM;
    if (memchr(out, '.', (size_t)length) != NULL) {
        while (out[length - 1] == '0') length--;
        if (out[length - 1] == '.') length--;
    }
    if (length == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        length = 1;
    }
    return length;
}
