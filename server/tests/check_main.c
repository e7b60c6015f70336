/* check_main.c -- the main() of every Check test binary, unit and black-box (see check_main.h):
 * check_main_setup(), then make_suite(), run with CK_ENV; EXIT_FAILURE if any check failed or
 * errored. The Makefile links this object into every server/tests and client-tests binary. */
#include <stdlib.h>

#include "check_main.h"

/* The default hook: nothing to set up. A strong definition elsewhere in the binary replaces
 * it (weak symbols: GCC and Clang on ELF). */
__attribute__((weak)) void check_main_setup(void)
{
}

int main(void)
{
    check_main_setup();
    SRunner *sr = srunner_create(make_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
