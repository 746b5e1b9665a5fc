#!/bin/sh
# doc_names.sh — the READMEs name only files and functions that exist
# (tests/tools/doc_names.py). First the tool itself: a README with a planted
# wrong file and function must fail, naming both, and the same README with
# the right names must pass. Then every Markdown file of the tree.
. "$(dirname "$0")/lib.inc"
TOOL="$(cd "$(dirname "$0")/../tools" && pwd)/doc_names.py"
TOP="$(cd "$(dirname "$0")/../.." && pwd)"
command -v python3 > /dev/null || { echo "skipped: no python3"; exit 77; }

# Names made here, so that this script does not hold them itself.
f="ps/planted_$$.c" fn="ps_planted_$$"
printf '# planted\n\n`%s` holds `%s()`; `ps/mode.c` holds `ps_mode_push`.\n' "$f" "$fn" > "$T/bad.md"
python3 "$TOOL" --root "$TOP" "$T/bad.md" > "$T/out.txt" 2>&1
[ $? -eq 1 ] && grep -q "\`$f\`: no such file" "$T/out.txt" &&
    grep -q "\`$fn()\`: not in the tree" "$T/out.txt" &&
    ! grep -q 'ps_mode_push\|ps/mode.c' "$T/out.txt" ||
    { cat "$T/out.txt"; fail "the tool did not catch the planted names (or blamed right ones)"; }
printf '# right\n\n`ps/mode.c` holds `ps_mode_push()`, read by `service_step.c`.\n' > "$T/good.md"
python3 "$TOOL" --root "$TOP" "$T/good.md" > "$T/out.txt" 2>&1 ||
    { cat "$T/out.txt"; fail "the tool refused names that exist"; }
ok "the tool catches a wrong file and function, names them, and passes right ones"

python3 "$TOOL" --root "$TOP" > "$T/out.txt" 2>&1 ||
    { cat "$T/out.txt"; fail "a README names what the tree does not have"; }
ok "$(tail -1 "$T/out.txt")"
