/* Replay runner: links with one fuzz harness and calls its LLVMFuzzerTestOneInput
 * on every file of the corpus directories (or files) given as arguments, in name
 * order, printing TAP: "ok N - corpus/HARNESS/FILE" per input, then "1..N". An
 * input that breaks the harness aborts the program (the sanitizers say why), so
 * the plan is missing and the TAP reader fails the run. */
#include "config.h"

#include <string.h>

#include "fuzz.h"

static int n_done = 0;

/* The last two components of @p dir, then the file: "corpus/model/llama3-8b.json". */
static char *display_name(const char *dir, const char *file)
{
  char *base = g_path_get_basename(dir);
  char *parent_dir = g_path_get_dirname(dir);
  char *parent = g_path_get_basename(parent_dir);
  char *out = g_strdup_printf("%s/%s/%s", parent, base, file);
  g_free(parent);
  g_free(parent_dir);
  g_free(base);
  return out;
}

static gboolean run_one(const char *path, const char *shown)
{
  gchar *text = NULL;
  gsize len = 0;
  GError *err = NULL;
  if (!g_file_get_contents(path, &text, &len, &err)) {
    printf("not ok %d - %s: %s\n", ++n_done, shown, err->message);
    g_error_free(err);
    return FALSE;
  }
  /* an exact-size copy, so reading one byte past the input is an ASan report */
  uint8_t *data = g_malloc(len ? len : 1);
  memcpy(data, text, len);
  g_free(text);
  fflush(stdout);
  LLVMFuzzerTestOneInput(data, len);
  g_free(data);
  printf("ok %d - %s\n", ++n_done, shown);
  fflush(stdout);
  return TRUE;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  gboolean all_ok = TRUE;
  for (int i = 1; i < argc; i++) {
    if (!g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
      all_ok &= run_one(argv[i], argv[i]);
      continue;
    }
    GError *err = NULL;
    GDir *d = g_dir_open(argv[i], 0, &err);
    if (d == NULL) {
      printf("not ok %d - %s: %s\n", ++n_done, argv[i], err->message);
      g_error_free(err);
      all_ok = FALSE;
      continue;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *f;
    while ((f = g_dir_read_name(d)) != NULL)
      g_ptr_array_add(names, g_strdup(f));
    g_dir_close(d);
    g_ptr_array_sort(names, cmp_str);
    for (guint j = 0; j < names->len; j++) {
      const char *name = g_ptr_array_index(names, j);
      char *path = g_build_filename(argv[i], name, NULL);
      if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        char *shown = display_name(argv[i], name);
        all_ok &= run_one(path, shown);
        g_free(shown);
      }
      g_free(path);
    }
    g_ptr_array_free(names, TRUE);
  }
  printf("1..%d\n", n_done);
  return all_ok && n_done > 0 ? 0 : 1;
}
