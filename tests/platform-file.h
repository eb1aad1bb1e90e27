/* Shared by the tests that load a generated platform into SimGrid: the platform of
 * `spsim platform dgx` for some options, written to a temporary file. */
#ifndef SPSIM_TEST_PLATFORM_FILE_H
#define SPSIM_TEST_PLATFORM_FILE_H

#include <glib.h>
#include <unistd.h>
#include "platform_gen.h"

/* The platform of @p o in a new temporary file: its path (g_unlink and g_free it). */
static inline char *platform_file(const sp_platform_opts *o)
{
  GError *err = NULL;
  char *xml = sp_platform_dgx_xml(o, &err);
  g_assert_no_error(err);
  char *path = NULL;
  int fd = g_file_open_tmp("spsim-test-XXXXXX.xml", &path, &err);
  g_assert_no_error(err);
  close(fd);
  g_assert_true(g_file_set_contents(path, xml, -1, &err));
  g_assert_no_error(err);
  g_free(xml);
  return path;
}

#endif
