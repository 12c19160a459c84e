# SPDX-License-Identifier: Apache-2.0
"""The web UI's screenshots in docs/ui.md are those the screenshot script
makes: it runs (tests/integration/ui_screenshots.py: every page at two
window sizes, in Chromium, no console message on any), into the build
directory, and docs/ui.md must show exactly its files, each checked in
under docs/ui/ as a PNG of the size the script made."""
import os
import re

import ui_screenshots
from lib import *


def main():
    out = os.path.join(BUILD, "ui-screenshots")
    made = ui_screenshots.shoot(out)
    check(len(made) == len(ui_screenshots.PAGES) * len(ui_screenshots.SIZES),
          f"{len(made)} screenshots made")
    with open(os.path.join(SRC, "docs", "ui.md"), encoding="utf-8") as f:
        shown = set(re.findall(r"\]\(ui/([^)\s]+\.png)\)", f.read()))
    check(shown == set(made), f"docs/ui.md shows {sorted(shown ^ set(made))} differently from the script")
    for name, size in made.items():
        path = os.path.join(SRC, "docs", "ui", name)
        check(os.path.exists(path), f"docs/ui/{name} is not checked in")
        check(ui_screenshots.png_size(path) == size, f"docs/ui/{name} is not {size[0]}x{size[1]}")
        check(os.path.getsize(os.path.join(out, name)) > 5000, f"{name} is nearly empty")
    print(f"{len(made)} screenshots in {out}, as docs/ui.md shows them")


run_test(main)
