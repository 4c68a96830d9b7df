/* device.c — the backend's devices by name: the one table of their names (config.yaml's device
 * key, the --device options, what ptrain prints) and parsing a name once at that edge. Apart from
 * backend.c, and without its CUDA calls, so that code which only names devices (the config's key
 * table, its fuzz target) links without the op seam. */
#include "ptrain/backend.h"

#include <string.h>

const char *const backend_device_names[DEVICE_COUNT + 1] = {
    [DEVICE_AUTO] = "auto", [DEVICE_CPU] = "cpu", [DEVICE_CUDA] = "cuda", [DEVICE_COUNT] = NULL};

bool backend_device_parse(const char *text, pt_device *out)
{
    for (int d = 0; text && d < DEVICE_COUNT; d++)
        if (!strcmp(text, backend_device_names[d])) {
            *out = (pt_device)d;
            return true;
        }
    return false;
}
