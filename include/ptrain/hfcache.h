/* hfcache.h — finding a Hub repo (a model or a dataset) in the local Hugging Face cache, offline,
 * as huggingface_hub lays it out. Shared by dataset lookup (src/data/source.c) and model lookup
 * (src/model/resolve.c), so both look in the same places and explain a miss the same way. */
#ifndef PTRAIN_HFCACHE_H
#define PTRAIN_HFCACHE_H

#include <stdbool.h>

#include "ptrain/error.h"

/* Whether name looks like a Hub repo id "org/name" (and not like a path or a data file): two parts of 1 to 96
 * characters. */
bool hfcache_is_repo_id(const char *name);
/* The hub cache directory (malloc'd) and which setting gave it (*from, static text):
 * HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub or
 * ~/.cache/huggingface/hub. */
char *hfcache_hub_dir(const char **from);
/* The snapshot directory (malloc'd) of repo id of kind "dataset" or "model" at revision (NULL:
 * main): refs/<revision> names the commit, a 40-hex revision is the commit itself. A miss fails
 * with PT_ERR_USER saying where it looked and how to download the repo. */
pt_status hfcache_snapshot(const char *kind, const char *id, const char *revision, char **dir);

#endif
