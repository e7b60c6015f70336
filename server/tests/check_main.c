/* check_main.c -- the main() of every Check test binary, unit and black-box (see check_main.h):
 * a 16 KiB cap on failure messages, check_main_setup(), then make_suite(), run with CK_ENV;
 * EXIT_FAILURE if any check failed or errored. The Makefile links this object into every
 * server/tests and client-tests binary. */
#include <stdlib.h>

#include "check_main.h"

/* The default hook: nothing to set up. A strong definition elsewhere in the binary replaces
 * it (weak symbols: GCC and Clang on ELF). */
__attribute__((weak)) void check_main_setup(void)
{
}

/* Check's default cap on a failure message is 4 KiB; a longer one (the black-box suites attach
 * up to 8000 bytes of the journal to a failed report assertion) ends the test as "Early exit
 * with return value 2" with the message lost. CK_MAX_MSG_SIZE still overrides this. */
#define MAX_MSG_BYTES (16u * 1024u)

int main(void)
{
    check_set_max_msg_size(MAX_MSG_BYTES);
    check_main_setup();
    SRunner *sr = srunner_create(make_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
