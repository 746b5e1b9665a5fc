#!/bin/sh
# include_cycles.sh — find files of one module that call back into each
# other (a cycle), the sign of a module cut in the wrong place.
#
#   tests/tools/include_cycles.sh [-v] [DIR]...
#
# In each DIR (default: every folder of C or CUDA sources under common, ps
# and worker — the modules; a folder of tests holds one program per file),
# file A depends on file B when A names a function B defines (not static,
# not main, and defined by B alone): what A reaches through the headers it
# includes, B's own or a shared _impl.h. Comments are removed first (cc -fpreprocessed). Two
# files that depend on each other, directly or through others, are a
# cycle; tsort finds them. With -v prints each dependency "DIR: A B".
# Exits 1 when a folder has a cycle (each printed), 0 when none has.
#
# Why names and not only the #include lines: a module's files share one
# public header (cluster.h, client.h) and often an _impl.h, so includes
# alone make every file of a module depend on every other; the functions a
# file names are the calls it makes.
set -u
verbose=0
[ "${1:-}" = "-v" ] && { verbose=1; shift; }
CC=${CC:-cc}
[ $# -gt 0 ] || set -- $(cd "$(dirname "$0")/../.." && find common ps worker \
    -type f \( -name '*.c' -o -name '*.cu' \) -exec dirname {} \; | sort -u |
    sed "s|^|$(cd "$(dirname "$0")/../.." && pwd)/|")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/include-cycles-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# The text of a source file without its comments (and string contents
# left as they are: a name in a message is rare, and only adds an edge).
strip() { $CC -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null || cat "$1"; }

# Functions a file defines, not static: a line at column 0 that starts with
# a type (no "static" before the name), names NAME( and reaches "{" before
# ";".
defs() {
    strip "$1" | awk '
        pending && /;[ \t]*$/ { pending = 0 }
        pending && /\{/ { print name; pending = 0 }
        /^[A-Za-z_]/ && /\(/ && !/^(static|typedef|extern|struct [A-Za-z_0-9]+ *\{|enum|union|#)/ {
            s = $0; sub(/\(.*/, "", s); n = split(s, w, /[^A-Za-z_0-9]+/)
            name = w[n]; pending = 1
            if (name == "" || name == "main" || s ~ /(^|[^A-Za-z_0-9])static[^A-Za-z_0-9]/) {
                pending = 0; next
            }
            rest = substr($0, index($0, "("))
            if (rest ~ /;[ \t]*$/) pending = 0
            else if (rest ~ /\{/) { print name; pending = 0 }
        }'
}

found=0
for dir in "$@"; do
    [ -d "$dir" ] || { echo "include_cycles: no folder $dir" >&2; exit 2; }
    : > "$tmp/defs"
    for f in "$dir"/*.c "$dir"/*.cu; do
        [ -f "$f" ] || continue
        u=${f##*/}
        defs "$f" | sed "s|\$| $u|" >> "$tmp/defs"
    done
    edges=$(for f in "$dir"/*.c "$dir"/*.cu; do
        [ -f "$f" ] || continue
        u=${f##*/}
        strip "$f" | grep -o '[A-Za-z_][A-Za-z0-9_]*' | sort -u |
        awk -v me="$u" 'NR == FNR { def[$1] = $2; n[$1]++; next }
                        ($1 in def) && n[$1] == 1 && def[$1] != me {
                            print me, def[$1] }' \
            "$tmp/defs" -
    done | sort -u)
    [ -n "$edges" ] || continue
    d=${dir#"$(cd "$(dirname "$0")/../.." && pwd)/"}
    [ $verbose -eq 1 ] && echo "$edges" | sed "s|^|$d: |"
    loop=$(echo "$edges" | tsort 2>&1 >/dev/null)
    if [ -n "$loop" ]; then
        echo "include_cycles: $d: files that call back into each other:"
        echo "$loop" | sed -n 's/^tsort: \([^: ]*\)$/    \1/p' | sort -u
        found=1
    fi
done
[ $found -eq 0 ] && echo "include_cycles: no cycle in $# folder(s)"
exit $found
