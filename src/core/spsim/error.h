/**
 * @file error.h
 * @brief Error domain of libspsim. Every fallible call takes a `GError **` and
 *        returns FALSE (or NULL / -1) with a message that says what was wrong and
 *        how to fix it. The library never aborts or exits on user input.
 */
#ifndef SPSIM_ERROR_H
#define SPSIM_ERROR_H

#include <glib.h>

G_BEGIN_DECLS

/** Error domain for all spsim errors. */
#define SP_ERROR (sp_error_quark())

/** Error codes in the #SP_ERROR domain. */
typedef enum {
  SP_ERROR_INVALID,     /**< a value is out of range or malformed (bad flag, bad size) */
  SP_ERROR_LAYOUT,      /**< an impossible parallel layout (sizes do not divide, ...) */
  SP_ERROR_SHAPE,       /**< a tensor shape or dtype does not fit the operation */
  SP_ERROR_IO,          /**< a file is missing or unreadable */
  SP_ERROR_PARSE,       /**< a file is malformed (XML, JSON) */
  SP_ERROR_PLATFORM,    /**< the platform cannot host the request */
  SP_ERROR_TRANSPORT,   /**< a transport failed (peer gone, timeout, deadlock) */
  SP_ERROR_MISMATCH,    /**< a verification found differing bytes */
  SP_ERROR_UNSUPPORTED, /**< the request is valid but not supported by this build */
} SpError;

/** @return the GQuark of the #SP_ERROR domain. */
GQuark sp_error_quark(void);

G_END_DECLS

#endif
