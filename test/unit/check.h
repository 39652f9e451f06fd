/*
 * Minimal check reporting shared by the unit tests: one line per check,
 * "PASS: name" or "FAIL: name: detail", and a summary line at the end.
 * The seed of the running test (check_seed) is appended to every failure.
 */
#ifndef USNIC_CHECK_H
#define USNIC_CHECK_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

static int check_passed, check_failed;
static uint64_t check_seed;

static void check(bool ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(bool ok, const char *name, const char *fmt, ...)
{
    if (ok) {
        printf("PASS: %s\n", name);
        check_passed++;
    } else {
        va_list ap;
        printf("FAIL: %s: ", name);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf(" [seed=0x%016" PRIx64 "]\n", check_seed);
        check_failed++;
    }
    fflush(stdout);
}

static int check_summary(const char *prog)
{
    printf("%s: %d passed, %d failed\n", prog, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif /* USNIC_CHECK_H */
