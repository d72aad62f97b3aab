#ifndef CRDKAFKA_SHIM_H
#define CRDKAFKA_SHIM_H

#include <librdkafka/rdkafka.h>

#endif
