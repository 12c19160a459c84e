/* SPDX-License-Identifier: Apache-2.0 */
/** Small macros every module uses. */
#ifndef PROFLET_COMMON_MACROS_H
#define PROFLET_COMMON_MACROS_H

#include <stddef.h>

/** The struct that embeds `ptr` as its member `member` (libuv handles are
 * embedded in their owners and recovered this way). */
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/** Elements of a fixed array. */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
