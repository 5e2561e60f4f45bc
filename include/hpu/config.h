/* libhpu — the settings in use (hpu(7), ENVIRONMENT and CONFIGURATION FILE). */
#ifndef HPU_CONFIG_H
#define HPU_CONFIG_H

#include <hpu/status.h>

HPU_EXTERN_C_BEGIN

/* The value libhpu uses for the setting `name`: its variable as hpu(7) lists
 * it ("HPU_NUM_DEVICES"), an older name of the variable, or its key in the
 * HPU_CONFIG file ("num_devices", "comm.ib.hca"). *value receives the text as
 * given, or the default as hpu(7) states it ("" when none is stated);
 * *source, unless source is NULL, where the text came from: the variable's
 * name for the environment, "HPU_CONFIG=<file>: <key>" for the file, or
 * "default". Settings read at initialisation report the value they had then;
 * those read at each use (HPU_KERNEL_ISA, HPU_TCP_LANES, ...) report the
 * environment of this moment. Release both strings with hpuFree.
 * HPU_ERROR_NOT_FOUND for a name that is not a setting, HPU_ERROR_INVALID_ARGUMENT
 * for a setting that no longer exists; HPU_ERROR_CONFIG when the configuration
 * itself is bad (as at initialisation). */
HPU_API hpuStatus_t hpuConfigGet(const char *name, char **value, char **source);

HPU_EXTERN_C_END

#endif /* HPU_CONFIG_H */
