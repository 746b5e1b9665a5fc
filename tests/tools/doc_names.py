#!/usr/bin/env python3
"""doc_names.py — every file and function a README names exists.

Reads the Markdown files given (default: every *.md of the tree, outside
build/) and checks each name written in backticks against the tree:

  * a file (`ps/service.c`, `service.c`, `tests/bench/big.sh`): a span with
    a source extension (.c .h .cu .cuh .sh .py .proto .inc .md .json .yaml)
    must be a file relative to the README's folder or to the tree's top, or,
    without a slash, the name of a file somewhere in the tree, or a name the
    code itself writes (the span verbatim in a source: a file a program
    makes); build/, bin/, absolute and $-paths are what a build or a run
    makes, not checked;
  * a function or symbol (`serve_worker`, `hc_rpc_call()`, `HETPS_CERTS`): a
    span that is one C identifier with an underscore, or an identifier
    followed by "(…)", must occur as a word in a file of the tree other
    than the Markdown files themselves (sources, scripts, the Makefile, the
    deploy files), so a README cannot vouch for itself, or in the headers
    of the libraries hetps is built on (nng, LMDB, OpenSSL, mbedTLS,
    protobuf-c, cJSON, CUnit), whose functions and options a README may
    name too.

A span with a placeholder in capitals (`tests/unit/test_NAME.c`) is a
pattern, not a name: not checked.

Prints one line per name that is not there ("FILE:LINE: `NAME`: no such
file" / "… not in the tree") and exits 1 when there is any; else prints how
many names it checked and exits 0. --root DIR: the tree (default: two
folders above this script).
"""
import argparse
import os
import re
import sys

SKIP_DIRS = {".git", "build", "bin", "hetps-data", "node_modules", "__pycache__"}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".sh", ".py", ".proto", ".inc",
              ".md", ".json", ".yaml", ".yml")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(.*\)$")
SPAN = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"(^|[/_.-])[A-Z]{2,}([/_.-]|$)")
LIB_HEADERS = ["/usr/include/nng", "/usr/include/lmdb.h", "/usr/include/openssl",
               "/usr/include/mbedtls", "/usr/include/protobuf-c",
               "/usr/include/cjson", "/usr/include/CUnit"]


def walk(root):
    """Every file of the tree, as paths relative to root."""
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")]
        for f in files:
            yield os.path.relpath(os.path.join(d, f), root)


def library_headers():
    for h in LIB_HEADERS:
        if os.path.isfile(h):
            yield h
        for d, _, fs in os.walk(h):
            for f in fs:
                yield os.path.join(d, f)


def words_of(root, files):
    """The identifiers written anywhere in the tree outside Markdown, and
    in the libraries' headers."""
    words, text = set(), []
    paths = [os.path.join(root, f) for f in files if not f.endswith(".md")]
    for p in paths + list(library_headers()):
        try:
            with open(p, "rb") as fh:
                data = fh.read(4 << 20)
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        t = data.decode("utf-8", "replace")
        words.update(IDENT.findall(t))
        if not p.startswith("/usr/include"):
            text.append(t)
    return words, "\n".join(text)


def check_file(name, md_dir, root, text, basenames):
    if name.startswith(("/", "$", "~", "build/", "bin/", "hetps-data/", "../")):
        return True
    if any(c in name for c in "*?{<[ ") or PLACEHOLDER.search(name):
        return True
    name = name.rstrip("/")
    if os.path.exists(os.path.join("/usr/include", name)):
        return True
    for base in (md_dir, ""):
        if os.path.exists(os.path.join(root, base, name)):
            return True
    return ("/" not in name and name in basenames) or name in text


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("docs", nargs="*")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    files = list(walk(root))
    basenames = {os.path.basename(f) for f in files}
    words, text = words_of(root, files)
    docs = a.docs or sorted(os.path.join(root, f) for f in files if f.endswith(".md"))
    bad = checked = 0
    for doc in docs:
        md_dir = os.path.relpath(os.path.dirname(os.path.abspath(doc)), root)
        in_code = False
        with open(doc, encoding="utf-8") as fh:
            for ln, line in enumerate(fh, 1):
                if line.lstrip().startswith("```"):
                    in_code = not in_code
                    continue
                if in_code:
                    continue
                for span in SPAN.findall(line):
                    span = span.strip()
                    m = CALL.match(span)
                    if span.endswith(SOURCE_EXT) and not m:
                        checked += 1
                        if not check_file(span, md_dir, root, text, basenames):
                            print("%s:%d: `%s`: no such file" % (os.path.relpath(doc, root), ln, span))
                            bad += 1
                    elif m or (IDENT.fullmatch(span) and "_" in span.strip("_")):
                        name = m.group(1) if m else span
                        checked += 1
                        if name not in words:
                            print("%s:%d: `%s`: not in the tree" % (os.path.relpath(doc, root), ln, span))
                            bad += 1
    if bad:
        print("doc_names: %d of %d names in %d files are not in the tree" % (bad, checked, len(docs)))
        return 1
    print("doc_names: %d names in %d files, every one in the tree" % (checked, len(docs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
