/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the control agent's tests: the keymap through the
 * agent's own RPCs (layout_set's parameters, layout_get's answer).
 */
#ifndef AGENT_TEST_UTIL_H
#define AGENT_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "sg_ctl_client.h"

/* layout_set's parameters for keymap @p km. */
static inline void keymap_json(char *buf, size_t cap, const uint16_t *km)
{
	int len = snprintf(buf, cap, "{\"keymap\":[");

	for (int i = 0; i < SG_BUCKETS; i++)
		len += snprintf(buf + len, cap - (size_t)len, "%s%u", i ? "," : "", km[i]);
	snprintf(buf + len, cap - (size_t)len, "]}");
}

/* Whether layout_get shows keymap @p km now. */
static inline bool keymap_is(struct sg_ctl_client *c, const uint16_t *km)
{
	char *res = NULL;
	json_t *j = NULL, *arr;
	bool same = false;

	if (sg_ctl_client_call(c, "layout_get", NULL, &res, NULL) == 0)
		j = json_loads(res, 0, NULL);
	arr = j ? json_object_get(j, "keymap") : NULL;
	if (arr && json_array_size(arr) == SG_BUCKETS) {
		same = true;
		for (size_t i = 0; i < SG_BUCKETS; i++)
			same &= json_integer_value(json_array_get(arr, i)) == km[i];
	}
	json_decref(j);
	free(res);
	return same;
}

#endif /* AGENT_TEST_UTIL_H */
