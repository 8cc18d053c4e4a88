#!/bin/sh
# The layers of src/: a folder includes only itself and the folders below it,
#   core <- quant <- gguf;  quant <- kernels;  gguf <- text;
#   kernels, text <- model <- engine <- offline
# (kernels/x86 and kernels/arm never include each other; include/pocket.h
# and system headers are open to all). Every `#include "..."` of every file
# in src/ is checked; a breach prints FILE:LINE and what it includes. The CLI
# (tools/) uses only the public API: it includes pocket.h and its own headers.
allowed() {
    case $1 in
        core) echo "core" ;;
        quant) echo "core quant" ;;
        gguf) echo "core quant gguf" ;;
        kernels) echo "core quant kernels" ;;
        text) echo "core gguf text" ;;
        model) echo "core quant gguf kernels text model" ;;
        engine) echo "core quant gguf kernels text model engine" ;;
        offline) echo "core quant gguf kernels text model engine offline" ;;
        *) echo "" ;;
    esac
}
bad=0; n=0
for f in $(find src -name '*.[ch]' | sort); do
    layer=$(echo "$f" | cut -d/ -f2)
    [ "$layer" = "${f#src/}" ] && { echo "$f: a file outside the layer folders"; bad=$((bad + 1)); continue; }
    ok=$(allowed "$layer")
    [ -n "$ok" ] || { echo "$f: unknown layer folder src/$layer (add it to tests/unit/t_layers.sh)"; bad=$((bad + 1)); continue; }
    isa=$(echo "$f" | sed -n 's#^src/kernels/\(x86\|arm\)/.*#\1#p')
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" >/tmp/layers.$$ || true
    while IFS= read -r line; do
        n=$((n + 1))
        inc=$(echo "$line" | sed 's/^[0-9]*:[^"]*"\([^"]*\)".*/\1/')
        num=${line%%:*}
        [ "$inc" = pocket.h ] && continue
        # an include from src/ names its folder; a bare name is relative to the file
        case $inc in */*) top=${inc%%/*} ;; *) top=$layer ;; esac
        case " $ok " in *" $top "*) ;; *)
            echo "$f:$num: layer $layer includes $inc (allowed: $ok)"; bad=$((bad + 1)); continue ;;
        esac
        case $isa:$inc in
            x86:kernels/arm/*|arm:kernels/x86/*) echo "$f:$num: kernels/$isa includes $inc"; bad=$((bad + 1)) ;;
        esac
        case $inc in */*) [ -e "src/$inc" ] || { echo "$f:$num: includes $inc, which is not in src/"; bad=$((bad + 1)); } ;; esac
    done </tmp/layers.$$
    rm -f /tmp/layers.$$
done
for f in $(find tools -name '*.[ch]' | sort); do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
        inc=$(echo "$line" | sed 's/^[0-9]*:[^"]*"\([^"]*\)".*/\1/')
        [ "$inc" = pocket.h ] || [ -e "tools/$inc" ] || echo "$f:${line%%:*}: the CLI includes $inc (only pocket.h and tools/ headers)"
    done
done >/tmp/layers-tools.$$
t=$(wc -l </tmp/layers-tools.$$); cat /tmp/layers-tools.$$; rm -f /tmp/layers-tools.$$
bad=$((bad + t))
echo "t_layers: $n includes checked, $bad breaches"
[ $n -gt 100 ] || { echo "FAIL: too few includes found ($n): is this the project root?"; exit 1; }
[ $bad -eq 0 ]
