/* adapter_internal.h — what the files of src/adapter share: the adapter.h5 reader that
 * adapter_load.c calls. */
#ifndef PTRAIN_ADAPTER_INTERNAL_H
#define PTRAIN_ADAPTER_INTERNAL_H

#include "ptrain/adapter.h"

/* Read dir/adapter.h5 or the .h5 file_path itself onto m (adapter_h5.c). */
pt_status adapter_h5_load(const char *file_path, const pt_model *m, pt_adapter *l);

#endif
