/* check_http.c -- the descriptor choice of the 128-event-stall workaround (http.c): a socket
 * for worker w of n must have fd % n == w, and its peer must be closed; and the connection
 * limit chosen from the open-files limit and --max-connections. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "check_main.h"
#include "http.h"

START_TEST(test_closed_socket_for_every_worker)
{
    /* Other descriptors open around it, at both parities, as in a server with connections. */
    int pad[7];
    for (int i = 0; i < 7; i++)
        pad[i] = dup(0);
    for (unsigned n = 1; n <= 5; n++)
        for (unsigned w = 0; w < n; w++)
            for (int round = 0; round < 3; round++) {
                int fd = http_closed_socket_for(w, n);
                ck_assert_msg(fd >= 0, "no socket for worker %u of %u", w, n);
                ck_assert_msg((unsigned)fd % n == w, "fd %d for worker %u of %u", fd, w, n);
                char c;
                ck_assert_int_eq(read(fd, &c, 1), 0); /* the peer is closed */
                ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
                if (round < 2)
                    close(fd); /* round 2 keeps it: the next call starts one higher */
            }
    for (int i = 0; i < 7; i++)
        close(pad[i]);
    ck_assert_int_eq(http_closed_socket_for(2, 2), -1);
    ck_assert_int_eq(http_closed_socket_for(0, 0), -1);
}
END_TEST

START_TEST(test_connection_limit_is_the_open_files_limit_minus_64_or_max_connections)
{
    ck_assert_uint_eq(http_connection_limit_for(1024, 0), 960);
    ck_assert_uint_eq(http_connection_limit_for(1048576, 0), 1048512);
    ck_assert_uint_eq(http_connection_limit_for(100, 0), 50); /* few descriptors: half */
    ck_assert_uint_eq(http_connection_limit_for(1024, 2), 2);
    ck_assert_uint_eq(http_connection_limit_for(1024, 960), 960);
    ck_assert_uint_eq(http_connection_limit_for(1024, 961), 960); /* not past the descriptors */
    ck_assert_uint_eq(http_connection_limit_for(1024, 1048576), 960);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("closed_socket_for");
    tcase_add_test(tc, test_closed_socket_for_every_worker);
    tcase_add_test(tc, test_connection_limit_is_the_open_files_limit_minus_64_or_max_connections);
    suite_add_tcase(s, tc);
    return s;
}
