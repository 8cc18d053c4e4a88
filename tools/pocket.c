/* pocket - command-line front end of libpocket.
 *
 *   pocket run        generate text from a prompt
 *   pocket info       describe a GGUF model
 *   pocket perplexity score a text file the way llama-perplexity does
 *   pocket imatrix    collect an importance matrix for quantization
 *   pocket quantize   convert a model to a quantized type mix
 *   pocket prune      keep the most salient routed experts of a MoE model
 *   pocket bench      prompt and generation throughput, every draw, bandwidth ceiling
 *   pocket serve      OpenAI-compatible HTTP server with a chat page
 *   pocket chat       interactive chat with a chat template
 *   pocket template   render a conversation with a chat template (Jinja)
 *
 * `pocket CMD --help` explains each command. Each command is in its own
 * tools/cmd_*.c file and goes through the public API in include/pocket.h.
 * Errors print one line and exit non-zero.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- main ------------------------------------------------------------------------------ */

static const char *main_help =
    "pocket - run Mixture-of-Experts language models (GGUF) on a CPU\n"
    "\n"
    "usage: pocket COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run          generate text from a prompt\n"
    "  info         describe a model: geometry, parameters, bytes per token, KV cache bytes\n"
    "  perplexity   score a text file (llama.cpp-compatible perplexity, KL divergence)\n"
    "  quantize     convert a model to a quantized type mix (Q8_0, Q4_K_M, Q2_K, MOE_Q2_K, ...)\n"
    "  imatrix      collect an importance matrix from calibration text (for quantize --imatrix)\n"
    "  prune        keep K of the routed experts per layer, the most salient on calibration text\n"
    "  bench        prompt/generation throughput: every draw, bandwidth ceiling, A/B with interval\n"
    "  serve        OpenAI-compatible HTTP server (chat/completions, streaming, metrics) and chat page\n"
    "  chat         interactive chat (ChatML, Llama-3, Gemma templates; --chat-template chatml for the bundled model)\n"
    "  template     render a conversation (messages, tools) with a model's chat template or a Jinja file\n"
    "\n"
    "`pocket COMMAND --help` explains a command. With no -m, the bundled model\n"
    "(" DEFAULT_MODEL_NAME ", a small Qwen3-MoE trained on the King James Bible) is used.\n"
    "POCKET_KERNELS=NAME forces a kernel variant; variants (* = usable on this CPU):";

/* The declared kernel variants, the usable ones starred, into buf. */
static void variant_list(char *buf, size_t n, int stars) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; pk_kernel_variant_name(i) && k + 32 < n; i++) {
        const char *v = pk_kernel_variant_name(i);
        k += (size_t)snprintf(buf + k, n - k, "%s%s%s", i ? (stars ? " " : ", ") : "", v,
                              stars && pk_kernel_variant_usable(v) ? "*" : "");
    }
}

/* POCKET_KERNELS must name a variant this CPU can run: anything else is an
 * error, not a silent fallback (a benchmark would report the wrong ISA). */
static void check_kernels_env(void) {
    int st = pk_kernel_env_status();
    if (!st) return;
    char list[256];
    variant_list(list, sizeof list, 0);
    const char *want = getenv("POCKET_KERNELS");
    if (st == 1) die("POCKET_KERNELS=%s: no such kernel variant (one of: %s)", want, list);
    die("POCKET_KERNELS=%s: this CPU cannot run that kernel variant (see pocket --help)", want);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        char list[256];
        variant_list(list, sizeof list, 1);
        printf("%s %s\n", main_help, list);
        return argc < 2 ? 1 : 0;
    }
    check_kernels_env();
    pk_fault_guard_install();   /* a model file truncated under us: one error line, not a crash */
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 2, argv + 2);
    if (!strcmp(cmd, "imatrix")) return cmd_imatrix(argc - 2, argv + 2);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 2, argv + 2);
    if (!strcmp(cmd, "prune")) return cmd_prune(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 2, argv + 2);
    if (!strcmp(cmd, "template")) return cmd_template(argc - 2, argv + 2);
    die("unknown command '%s' (see pocket --help)", cmd);
}
