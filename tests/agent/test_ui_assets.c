/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of what the web UI's pages are made of (agent/ui_html.c and
 * the assets scripts/embed.py builds in): every file of agent/assets/ is
 * built in byte for byte, and no file there is left out (so a stale or
 * wrong generator, or an asset missing from agent/meson.build, fails
 * here); a page's head carries the stylesheet and a script element the
 * script, whole and once; the escaping turns markup into entities, control
 * characters into visible escapes and invalid UTF-8 into U+FFFD; JSON
 * strings are valid, markup-free UTF-8; long label sets fold.
 * TEST_DATA_DIR is agent/assets/. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ui.h"
#include "agent/ui_assets.h"
#include "common/buf.h"
#include "common/labels.h"
#include "test.h"

/* The file's bytes (NUL-terminated, `*len` without it); NULL if unreadable. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (data = malloc((size_t)n + 1)) != NULL) {
        if (fread(data, 1, (size_t)n, f) == (size_t)n) {
            data[n] = '\0';
            *len = (size_t)n;
        } else {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    return data;
}

static const struct agent__ui_asset_file *asset(const char *name)
{
    for (size_t i = 0; i < agent__ui_asset_count; i++)
        if (strcmp(agent__ui_asset_table[i].name, name) == 0)
            return &agent__ui_asset_table[i];
    return NULL;
}

TEST(every_asset_is_its_file_byte_for_byte)
{
    ASSERT_GE(agent__ui_asset_count, 2);
    for (size_t i = 0; i < agent__ui_asset_count; i++) {
        const struct agent__ui_asset_file *a = &agent__ui_asset_table[i];
        size_t len = 0;
        char *disk = slurp(test_data_path(a->name), &len);

        ASSERT_NOT_NULL(disk);
        ASSERT_EQ(a->len, len);
        ASSERT(memcmp(a->data, disk, len) == 0);
        ASSERT_EQ(a->data[a->len], '\0'); /* also a C string */
        free(disk);
    }
    ASSERT_NOT_NULL(asset("ui.css"));
    ASSERT_NOT_NULL(asset("filter.js"));
    ASSERT(asset("ui.css")->data == agent__ui_asset_ui_css);
    ASSERT_EQ(asset("ui.css")->len, agent__ui_asset_ui_css_len);
    ASSERT(asset("filter.js")->data == agent__ui_asset_filter_js);
    ASSERT_EQ(asset("filter.js")->len, agent__ui_asset_filter_js_len);
    ASSERT(asset("flame.js")->data == agent__ui_asset_flame_js);
    ASSERT_EQ(asset("flame.js")->len, agent__ui_asset_flame_js_len);
}

TEST(no_file_of_the_folder_is_left_out)
{
    DIR *d = opendir(test_data_path("."));
    struct dirent *e;
    size_t files = 0;

    ASSERT_NOT_NULL(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (!asset(e->d_name))
            test__fail(__FILE__, __LINE__, "agent/assets/%s is not built in (agent/meson.build)",
                       e->d_name);
        files++;
    }
    closedir(d);
    ASSERT_EQ(files, agent__ui_asset_count);
}

/* The number of times `needle` occurs in `hay`. */
static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

TEST(head_carries_the_stylesheet_whole_and_once)
{
    struct buf b, want;

    buf_init(&b, 1 << 20);
    buf_init(&want, 1 << 20);
    agent__ui_head(&b, "Targets");
    ASSERT_EQ(buf_puts(&want, "<style>"), 0);
    ASSERT_EQ(buf_append(&want, agent__ui_asset_ui_css, agent__ui_asset_ui_css_len), 0);
    ASSERT_EQ(buf_puts(&want, "</style>"), 0);
    ASSERT_NOT_NULL(b.data);
    ASSERT(strncmp(b.data, "<!DOCTYPE html>", 15) == 0);
    ASSERT_EQ(count(b.data, "<title>Targets - proflet</title>"), 1);
    ASSERT_EQ(count(b.data, want.data), 1);
    ASSERT_EQ(count(b.data, "<style"), 1);
    ASSERT_EQ(count(b.data, "</style>"), 1);
    /* The menu follows the head, and the page's content follows the menu. */
    ASSERT(strstr(b.data, "</style></head><body><header>") != NULL);
    ASSERT(strstr(b.data, "<a href=\"/service-discovery\">") != NULL);
    ASSERT_EQ(count(b.data, "<main>"), 1);
    ASSERT(strcmp(b.data + b.len - 6, "<main>") == 0);
    buf_done(&want);
    buf_done(&b);
}

TEST(script_element_carries_the_script)
{
    struct buf b, want;

    buf_init(&b, 1 << 20);
    buf_init(&want, 1 << 20);
    agent__ui_script(&b, agent__ui_asset_filter_js, agent__ui_asset_filter_js_len);
    ASSERT_EQ(buf_puts(&want, "<script>"), 0);
    ASSERT_EQ(buf_append(&want, agent__ui_asset_filter_js, agent__ui_asset_filter_js_len), 0);
    ASSERT_EQ(buf_puts(&want, "</script>"), 0);
    ASSERT_EQ(b.len, want.len);
    ASSERT_STR_EQ(b.data, want.data);
    buf_done(&want);
    buf_done(&b);
}

TEST(escaping_markup_controls_and_invalid_bytes)
{
    struct buf b;

    buf_init(&b, 1 << 20);
    ASSERT_EQ(agent__ui_esc(&b, "<img src=x onerror=\"a('1')\">&amp;"), 0);
    ASSERT_STR_EQ(b.data, "&lt;img src=x onerror=&quot;a(&#39;1&#39;)&quot;&gt;&amp;amp;");
    buf_reset(&b);
    ASSERT_EQ(agent__ui_esc(&b, "a\x1b[31m\xff\nb<"), 0);
    ASSERT_STR_EQ(b.data, "a\\x1b[31m\xef\xbf\xbd\\nb&lt;");
    buf_reset(&b);
    ASSERT_EQ(agent__ui_esc_text(&b, "k: v\n\tw\xfe<", true), 0); /* lines kept */
    ASSERT_STR_EQ(b.data, "k: v\n\tw\xef\xbf\xbd&lt;");
    buf_reset(&b);
    ASSERT_EQ(agent__ui_esc(&b, NULL), 0);
    ASSERT_EQ(b.len, 0);
    buf_done(&b);
}

TEST(json_strings_are_valid_and_markup_free)
{
    struct buf b;

    buf_init(&b, 1 << 20);
    ASSERT_EQ(agent__ui_json_str(&b, "a\"\\<script>&\n\x01\x7f\xff\xe2\x80\xa8\xc3\xa9"), 0);
    ASSERT_STR_EQ(b.data, "\"a\\\"\\\\\\u003cscript\\u003e\\u0026\\u000a\\u0001\\u007f"
                          "\\ufffd\\u2028\xc3\xa9\"");
    buf_reset(&b);
    ASSERT_EQ(agent__ui_json_str(&b, NULL), 0);
    ASSERT_STR_EQ(b.data, "\"\"");
    buf_done(&b);
}

TEST(long_label_sets_fold)
{
    struct labels ls = LABELS_INIT;
    struct buf b;
    char name[8];

    buf_init(&b, 1 << 20);
    labels_set(&ls, "__address__", "x:1");
    labels_set(&ls, "__name__", "process_cpu");
    for (int i = 0; i < 9; i++) {
        snprintf(name, sizeof(name), "l%d", i);
        labels_set(&ls, name, "<v>");
    }
    agent__ui_labels(&b, &ls, false, true); /* __name__ and 9 labels: 6 shown, 4 fold */
    ASSERT_EQ(count(b.data, "<span class=\"l\">"), 10);
    ASSERT_EQ(count(b.data, "<details class=\"more\"><summary>4 more</summary>"), 1);
    ASSERT(strstr(b.data, "__address__") == NULL);
    ASSERT(strstr(b.data, "l0=&lt;v&gt;") != NULL);
    ASSERT(strstr(b.data, "<summary>4 more</summary><span class=\"l\">l5=") != NULL);
    ASSERT(strcmp(b.data + b.len - 10, "</details>") == 0);
    buf_reset(&b);
    labels_del(&ls, "l8");
    labels_del(&ls, "l7");
    labels_del(&ls, "l6");
    labels_del(&ls, "l5");
    agent__ui_labels(&b, &ls, false, true); /* six: none folds */
    ASSERT_EQ(count(b.data, "<span class=\"l\">"), 6);
    ASSERT(strstr(b.data, "details") == NULL);
    buf_done(&b);
    labels_done(&ls);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
