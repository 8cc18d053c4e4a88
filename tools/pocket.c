/* pocket - command-line front end of libpocket.
 *
 *   pocket run        generate text from a prompt
 *   pocket info       describe a GGUF model
 *   pocket perplexity score a text file the way llama-perplexity does
 *
 * `pocket CMD --help` explains each command. Each command is in its own
 * tools/cmd_*.c file and goes through the public API in include/pocket.h.
 * Errors print one line and exit non-zero.
 */
#include <string.h>
#include <stdio.h>

#include "cli.h"

/* ---- main ------------------------------------------------------------------------------ */

static const char *main_help =
    "pocket - run Mixture-of-Experts language models (GGUF) on a CPU\n"
    "\n"
    "usage: pocket COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run          generate text from a prompt\n"
    "  info         describe a model: geometry, parameters, bytes per token\n"
    "  perplexity   score a text file (llama.cpp-compatible perplexity)\n"
    "\n"
    "`pocket COMMAND --help` explains a command. With no -m, the bundled model\n"
    "(" DEFAULT_MODEL_NAME ", a small Qwen3-MoE trained on the King James Bible) is used.\n"
    "POCKET_KERNELS=ref|avx2|avx512 forces a kernel variant.\n";

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(main_help, stdout);
        return argc < 2 ? 1 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 2, argv + 2);
    die("unknown command '%s' (see pocket --help)", cmd);
}
