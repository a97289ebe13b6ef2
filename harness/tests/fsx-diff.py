#!/usr/bin/env python3
"""After a failed fsx run: where the host's copies differ from the models
the guest wrote at its failure (fsx -o), page by page.

    fsx-diff.py MODEL_DIR SHARE_DIR

A page the guest read wrong but the host has right was a stale read in
the guest (a mapping, a TLB entry); a page wrong on the host too lost a
write or took one meant for elsewhere.  Prints what it finds; exit 0.
"""
import os
import sys

PAGE = 4096


def main():
    models, share = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(models)):
        with open(os.path.join(models, name), "rb") as f:
            want = f.read()
        try:
            with open(os.path.join(share, name), "rb") as f:
                got = f.read()
        except OSError as e:
            print(f"fsx-diff: {name}: {e}")
            continue
        if len(got) != len(want):
            print(f"fsx-diff: {name}: host has {len(got)} bytes, "
                  f"the model {len(want)}")
        bad = [pg for pg in range(0, max(len(got), len(want)), PAGE)
               if got[pg:pg + PAGE] != want[pg:pg + PAGE]]
        print(f"fsx-diff: {name}: {len(bad)} pages differ on the host")
        for pg in bad[:8]:
            g, w = got[pg:pg + PAGE], want[pg:pg + PAGE]
            n = sum(1 for a, b in zip(g, w) if a != b) + abs(len(g) - len(w))
            zero = "all zero" if not any(g) else "not zero"
            print(f"fsx-diff:   page 0x{pg:x}: {n} bytes differ, host's page "
                  f"{zero}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
