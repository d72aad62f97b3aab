#ifndef CRDKAFKA_SHIM_H
#define CRDKAFKA_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <librdkafka/rdkafka.h>

/// The file the dynamic linker loaded librdkafka from, or NULL if it cannot tell.
static inline const char *crdkafka_loaded_library_path(void) {
    Dl_info info;
    if (dladdr((void *)&rd_kafka_version_str, &info) != 0 && info.dli_fname != NULL) {
        return info.dli_fname;
    }
    return NULL;
}

#endif
