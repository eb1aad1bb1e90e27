/* Shared declarations of the fuzz harnesses (tests/fuzz/fuzz-*.c): the libFuzzer
 * entry point, built either with clang -fsanitize=fuzzer (bench/fuzz.sh) or with
 * replay.c, which feeds it every file of a corpus (make check). */
#ifndef SPSIM_FUZZ_H
#define SPSIM_FUZZ_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* libFuzzer's entry point: parse @p data; return 0. A harness aborts (a finding)
 * only when the code under test breaks one of its promises. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* GLib criticals and warnings are bugs under fuzzing (as G_DEBUG=fatal-criticals
 * makes them in make check): print them and abort(), which libFuzzer catches and
 * saves the input for (a fatal g_log would raise SIGTRAP, which it does not). */
static inline void fuzz_log_handler(const gchar *domain, GLogLevelFlags level, const gchar *message,
                                    gpointer data)
{
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)) {
    fprintf(stderr, "fuzz: GLib %s from %s: %s\n",
            (level & G_LOG_LEVEL_WARNING) ? "warning" : "critical or error", domain ? domain : "-",
            message);
    abort();
  }
  g_log_default_handler(domain, level, message, data);
}

/* Call at the start of every input. */
static inline void fuzz_setup(void)
{
  static gboolean done = FALSE;
  if (!done) {
    g_log_set_default_handler(fuzz_log_handler, NULL);
    done = TRUE;
  }
}

/* A broken promise: say what and abort, so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond);                       \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fputc('\n', stderr);                                                                  \
      abort();                                                                              \
    }                                                                                       \
  } while (0)

/* Every failing call must set its GError (callers print err->message). */
#define FUZZ_EXPECT_ERROR(err) FUZZ_ASSERT((err) != NULL && (err)->message != NULL, "no error set")

#endif
