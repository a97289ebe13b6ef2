#!/usr/bin/env python3
"""Write the tree of a git index with docs/interop/vhost-user.rst's
includes of this series' *.rst.inc files replaced by their text, and the
included files left out; print the tree's id.

    series-inline.py SRC INDEX

The repository keeps the series' protocol text in include files of its
own, so that vhost-user.rst, an upstream file, changes by a few lines
(patch-lines); a reviewer reads the text where it belongs, in the page.
The index itself is not changed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

RST = "docs/interop/vhost-user.rst"
INC = re.compile(r"^\.\. include:: (vhost-user-[^ /]*\.rst\.inc)\s*$")


def main():
    src, index = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "index")
        shutil.copy(index, copy)
        env = dict(os.environ, GIT_INDEX_FILE=copy)

        def git(*args, data=None):
            return subprocess.run(["git", "-C", src, *args], env=env,
                                  input=data, check=True,
                                  capture_output=True).stdout

        incs = git("ls-files", "--", "docs/interop/*.rst.inc").decode().split()
        if incs and git("ls-files", "--", RST).strip():
            lines = git("show", ":" + RST).decode().split("\n")
            out = []
            for line in lines:
                m = INC.match(line)
                path = "docs/interop/" + m.group(1) if m else None
                if path in incs:
                    out.extend(body(git("show", ":" + path).decode()))
                else:
                    out.append(line)
            blob = git("hash-object", "-w", "--stdin",
                       data="\n".join(out).encode()).decode().strip()
            git("update-index", "--cacheinfo", f"100644,{blob},{RST}")
        if incs:
            git("update-index", "--force-remove", "--", *incs)
        sys.stdout.write(git("write-tree").decode())


def body(text):
    """The include file's text without its leading comments (licence and
    notes about the file itself) and surrounding blank lines."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith(".. "):
            i += 1
            while i < len(lines) and (lines[i].startswith(" ")
                                      or lines[i] == ""):
                if lines[i] == "" and i + 1 < len(lines) and \
                        not lines[i + 1].startswith(" "):
                    break
                i += 1
        elif lines[i] == "":
            i += 1
        else:
            break
    lines = lines[i:]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


if __name__ == "__main__":
    main()
