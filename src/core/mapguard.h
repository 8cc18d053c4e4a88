/* core/mapguard.h - a registry of the model files pocket has mapped, so that a
 * read fault inside one (the file was truncated while mapped: SIGBUS) can be
 * reported as an error naming the file instead of a crash. The handler is
 * opt-in (pk_fault_guard_install in pocket.h); registration is always on and
 * costs one table slot per open file. */
#ifndef PK_MAPGUARD_H
#define PK_MAPGUARD_H

#include <stddef.h>

/* Record [addr, addr + len) as the mapping of path (copied, truncated to
 * fit). Silently does nothing when the table (64 mappings) is full. */
void pk_mapguard_add(const void *addr, size_t len, const char *path);
/* Forget the mapping that starts at addr (no-op if unknown). */
void pk_mapguard_remove(const void *addr);

#endif
