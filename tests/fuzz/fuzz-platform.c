/* Fuzz harness: platform XML files. The input is written to a temporary file, read
 * by spsim's platform reader (sp_plat_read: its facts must be finite and
 * consistent) and checked by sp_sim_check_platform, which loads it with SimGrid
 * in a forked child (a file whose header names `spsim platform dgx ...` is first
 * read as a command and compared with its output: the routed build's gate): whatever
 * the file holds must come back as a GError, never as a dead process. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "fuzz.h"
#include "platform.h"
#include "sim.h"
#include "spsim/error.h"

/* In the checker's child, crash signals take their default action: a SimGrid
 * abort there is an answer ("rejected"), not a crash of the fuzzed process, so
 * libFuzzer's handlers (inherited through fork) must not report it. */
static void child_default_signals(void)
{
  static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE };
  for (size_t i = 0; i < G_N_ELEMENTS(sigs); i++)
    signal(sigs[i], SIG_DFL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  static gboolean atfork = FALSE;
  if (!atfork) {
    pthread_atfork(NULL, NULL, child_default_signals);
    atfork = TRUE;
  }
  if (size > (1u << 20))
    return 0;
  GError *err = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp("spsim-fuzz-XXXXXX.xml", &path, &err);
  FUZZ_ASSERT(fd >= 0, "temporary file: %s", err->message);
  size_t off = 0;
  while (off < size) {
    ssize_t w = write(fd, data + off, size - off);
    FUZZ_ASSERT(w > 0, "write to %s failed", path);
    off += (size_t)w;
  }
  close(fd);
  sp_plat_desc *d = sp_plat_read(path, &err);
  if (d == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_clear_error(&err);
  } else {
    FUZZ_ASSERT(d->names->len >= 1 && d->names->len == d->group->len, "%u hosts, %u groups",
                d->names->len, d->group->len);
    for (guint i = 0; i < d->group->len; i++) {
      int32_t g = g_array_index(d->group, int32_t, i);
      FUZZ_ASSERT(g >= -1 && g < d->ngroups, "host %u in group %d of %d", i, g, d->ngroups);
    }
    FUZZ_ASSERT(isfinite(d->speed) && d->speed >= 0, "speed %g", d->speed);
    FUZZ_ASSERT(isfinite(d->gpu_mem) && d->gpu_mem >= 0, "gpu_mem %g", d->gpu_mem);
    FUZZ_ASSERT(d->gpus_per_node >= 0, "gpus_per_node %d", d->gpus_per_node);
    sp_plat_desc_free(d);
  }
  gboolean ok = sp_sim_check_platform(path, &err);
  if (ok) {
    FUZZ_ASSERT(err == NULL, "error set on success");
  } else {
    FUZZ_EXPECT_ERROR(err);
    FUZZ_ASSERT(err->domain == SP_ERROR, "error outside SP_ERROR: %s", err->message);
    g_error_free(err);
  }
  unlink(path);
  g_free(path);
  return 0;
}
