/* spsim's programs find each other beside the running executable. */
#include "config.h"
#include "spsim/programs.h"

#include <string.h>

char *sp_program_beside_self(const char *name)
{
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  if (self == NULL) return NULL;
  g_autofree char *dir = g_path_get_dirname(self);
  /* uninstalled (libtool): the wrapper scripts are in the folder above .libs */
  if (g_str_has_suffix(dir, "/.libs")) dir[strlen(dir) - strlen("/.libs")] = '\0';
  char *p = g_build_filename(dir, name, NULL);
  if (g_file_test(p, G_FILE_TEST_IS_EXECUTABLE)) return p;
  g_free(p);
  return NULL;
}
