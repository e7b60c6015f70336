/* common.c -- clocks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <time.h>

int64_t now_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

int64_t now_unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void fmt_kst(int64_t unix_us, char out[32])
{
    time_t t = (time_t)(unix_us / 1000000) + 9 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S+09:00", &tm);
}
