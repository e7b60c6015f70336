/* common.c -- clocks, and Korea-time dates written and read. */
#define _DEFAULT_SOURCE
#include "common.h"

#include <stdio.h>
#include <string.h>
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

static void put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

void copy_cstr(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void fmt_kst(int64_t unix_us, char out[32])
{
    int64_t t = unix_us / 1000000 + 9 * 3600;
    int64_t days = t / 86400, sod = t % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    /* Proleptic Gregorian date from days since 1970-01-01 (H. Hinnant's civil_from_days);
     * every response carries one or two of these, and gmtime_r + strftime cost ~10x more. */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned d = doy - (153 * mp + 2) / 5 + 1;
    unsigned m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = (int64_t)yoe + era * 400 + (m <= 2);
    if (y < 1000 || y > 9999) { /* strftime's own spelling of such years */
        time_t tt = (time_t)t;
        struct tm tm;
        gmtime_r(&tt, &tm);
        strftime(out, 32, "%Y-%m-%dT%H:%M:%S+09:00", &tm);
        return;
    }
    put2(out, (unsigned)(y / 100));
    put2(out + 2, (unsigned)(y % 100));
    out[4] = '-';
    put2(out + 5, m);
    out[7] = '-';
    put2(out + 8, d);
    out[10] = 'T';
    put2(out + 11, (unsigned)(sod / 3600));
    out[13] = ':';
    put2(out + 14, (unsigned)(sod / 60 % 60));
    out[16] = ':';
    put2(out + 17, (unsigned)(sod % 60));
    memcpy(out + 19, "+09:00", 7);
}

bool date_time_form(const char *s)
{
    static const char layout[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; layout[i] != '\0'; i++) /* stops at a NUL: it matches nothing */
        if (layout[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != layout[i])
            return false;
    return true;
}

bool parse_kst(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (!s || !date_time_form(s) || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 ||
        n != 19)
        return false;
    const char *rest = s + n;
    if (*rest == '.') {
        rest++;
        size_t digits = strspn(rest, "0123456789");
        if (digits < 1 || digits > 6)
            return false;
        rest += digits;
    }
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*rest || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || se > 60)
        return false; /* 2026-02-30 is no day: timegm would read it as March 2 */
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = se};
    *out = (int64_t)timegm(&tm) - 9 * 3600;
    return true;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
