/* backend.c - the table of forward-pass implementations. */
#include <string.h>
#include "backend.h"

const BackendOps *backend_find(const char *name)
{
	static const BackendOps *const all[] = { &backend_cpu, &backend_opencl };

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}
