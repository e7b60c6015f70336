/* check_profile_find.c -- unit tests for profile_builtin.c and profile_find.c: every shipped
 * profile is built in byte for byte and valid, a name resolves to a file in the search path
 * before the built-in one, and a name that does not exist is refused with the names that do (and
 * a did-you-mean), never a directory. Runs from the repository root (make test's directory). */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "profile_builtin.h"
#include "profile_find.h"

/* The whole file at `path`; its length in *len. Caller frees. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char *buf = malloc(1 << 20);
    ck_assert(buf != NULL);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

START_TEST(test_every_shipped_profile_is_built_in_byte_for_byte_and_valid)
{
    DIR *d = opendir("profiles");
    ck_assert_msg(d != NULL, "profiles/ not found in the working directory");
    size_t files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n <= 5 || strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        char name[PROFILE_NAME_MAX + 1], path[300];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        snprintf(path, sizeof path, "profiles/%s", e->d_name);
        size_t flen, blen = 0;
        char *file = read_all(path, &flen);
        const char *text = profile_builtin_text(name, &blen);
        ck_assert_msg(text != NULL, "%s is not built in", path);
        ck_assert_msg(blen == flen && memcmp(text, file, flen) == 0 && text[blen] == '\0',
                      "built-in %s differs from %s", name, path);
        struct profile *p = NULL;
        char err[ERR_LEN];
        ck_assert_msg(profile_parse(text, blen, name, NULL, NULL, &p, err) == 0, "%s", err);
        ck_assert_str_eq(p->name, name);
        profile_free(p);
        free(file);
        files++;
    }
    closedir(d);
    ck_assert_uint_ge(files, 8);
    ck_assert_uint_eq(profile_builtin_count(), files);
    ck_assert_ptr_null(profile_builtin_name(files));
}
END_TEST

/* An empty --profiles-dir: every shipped name still loads, from the binary. */
START_TEST(test_name_falls_back_to_the_built_in_profile)
{
    char dir[] = "/tmp/fakegate-find-XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    struct profile_search ps;
    profile_search_init(&ps, dir, NULL);
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_msg(profile_find_load(&ps, "lossy", "--profile lossy", &p, err) == 0, "%s", err);
    ck_assert_str_eq(p->name, "lossy");
    ck_assert_ptr_null(p->file); /* built in: nothing for SIGHUP to re-read */
    profile_free(p);
    /* Through the resolver too (schedule phases, X-Fakegate-Profile, PUT by name). */
    ck_assert_int_eq(profile_find_resolver("slow", &p, err, &ps), 0);
    ck_assert_str_eq(p->name, "slow");
    profile_free(p);
    rmdir(dir);
}
END_TEST

START_TEST(test_a_file_in_the_search_path_wins_over_the_built_in_one)
{
    char dir[] = "/tmp/fakegate-find-XXXXXX", path[64];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/normal.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fputs("{\"name\": \"normal\", \"description\": \"mine\", \"routes\": {}}", f);
    fclose(f);
    struct profile_search ps;
    profile_search_init(&ps, dir, NULL);
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_msg(profile_find_load(&ps, "normal", "--profile normal", &p, err) == 0, "%s", err);
    ck_assert_str_eq(p->description, "mine");
    ck_assert_str_eq(p->file, path);
    profile_free(p);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_unknown_name_lists_the_names_that_exist_and_suggests_one)
{
    char dir[] = "/tmp/fakegate-find-XXXXXX", path[64];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/zz-mine.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fputs("{}", f);
    fclose(f);
    struct profile_search ps;
    profile_search_init(&ps, dir, NULL);
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_int_eq(profile_find_load(&ps, "slwo", "--profile slwo", &p, err), -1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "--profile slwo: no such profile (did you mean \"slow\"?); the profiles "
                          "are: dawn-peak, flaky, lossy, normal, outage, saturated, slow, "
                          "throttled, zz-mine");
    ck_assert_int_eq(profile_find_load(&ps, "Bad Name", "--profile Bad Name", &p, err), -1);
    ck_assert_str_eq(err, "--profile Bad Name: a profile name is [a-z0-9_-]{1,64}, or give a path");
    char names[64];
    profile_find_names(&ps, names, sizeof names);
    ck_assert_str_eq(names, "dawn-peak, flaky, lossy, normal, outage, saturated, slow, ...");
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_a_value_with_a_slash_or_json_suffix_is_a_path)
{
    ck_assert(profile_spec_is_path("./normal"));
    ck_assert(profile_spec_is_path("mine.json"));
    ck_assert(!profile_spec_is_path("normal"));
    ck_assert(!profile_spec_is_path(".json"));
    struct profile_search ps;
    profile_search_init(&ps, NULL, NULL);
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_int_eq(profile_find_load(&ps, "/nonexistent/x.json", "--profile x", &p, err), -1);
    ck_assert_str_eq(err, "/nonexistent/x.json: No such file or directory");
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("profile_find");
    TCase *tc = tcase_create("lookup");
    tcase_add_test(tc, test_every_shipped_profile_is_built_in_byte_for_byte_and_valid);
    tcase_add_test(tc, test_name_falls_back_to_the_built_in_profile);
    tcase_add_test(tc, test_a_file_in_the_search_path_wins_over_the_built_in_one);
    tcase_add_test(tc, test_unknown_name_lists_the_names_that_exist_and_suggests_one);
    tcase_add_test(tc, test_a_value_with_a_slash_or_json_suffix_is_a_path);
    suite_add_tcase(s, tc);
    return s;
}
