/* The spsim error domain. */
#include "config.h"
#include "spsim/error.h"

G_DEFINE_QUARK(sp-error-quark, sp_error)
