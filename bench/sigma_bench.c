/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench: dispatches to the subcommands listed in sigma_bench.h. What
 * they share is bench_util.c's; nothing calls back here.
 */
#include <stdio.h>
#include <string.h>

#include "sg_version.h"
#include "sigma_bench.h"

struct sigma_bench_cmd {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *help;
};

#define SIGMA_BENCH_ENTRY(name, help) {#name, sigma_bench_##name, help},
static const struct sigma_bench_cmd cmds[] = {SIGMA_BENCH_COMMANDS(SIGMA_BENCH_ENTRY)};
#undef SIGMA_BENCH_ENTRY

static void usage(FILE *f)
{
	fprintf(f, "usage: sigma-bench <command> [options]   (sigma-bench <command> --help)\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "  %-10s %s\n", "help", "this list (also -h, --help)");
	fprintf(f, "  %-10s %s\n", "--version", "print the release and exit");
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		fputs(SG_VERSION_TEXT("sigma-bench"), stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].main(argc - 1, argv + 1);
	fprintf(stderr, "sigma-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
