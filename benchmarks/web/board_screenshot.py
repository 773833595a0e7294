"""Screenshot of the board's static page in headless Chromium (Playwright): docs/img/board.png.

Usage: python benchmarks/web/board_screenshot.py [--page docs/board/index.html] [--out docs/img/board.png]
Needs Debian's chromium and the playwright package (the test extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=Path("docs/board/index.html"))
    parser.add_argument("--out", type=Path, default=Path("docs/img/board.png"))
    parser.add_argument("--width", type=int, default=1600)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": 900}, device_scale_factor=1)
        page.goto(args.page.resolve().as_uri())
        args.out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.out), full_page=True)
        browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
