"""PDF export of a report page: headless Chromium's print-to-PDF.

Chromium renders the same HTML a reader opens, so the PDF and the page cannot drift apart. It
is not a Python dependency: Debian's `chromium` package (or `chromium-browser`, Google Chrome)
must be on PATH; without it the export fails with a one-line error naming the package.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from privlab.errors import MissingExtraError, PrivlabError
from privlab.utils.atomic import atomic_open

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_command(browser: str, profile: Path) -> list[str]:
    """Flags for a sandbox-less headless run with a throw-away profile (CI containers)."""
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", f"--user-data-dir={profile}"]


def export_pdf(html: str | Path, pdf: str | Path, *, timeout: float = 120.0) -> Path:
    """Print the HTML page `html` to `pdf` (A4, backgrounds on), written atomically."""
    browser = find_browser()
    if browser is None:
        raise MissingExtraError("PDF export needs headless Chromium on PATH: install Debian's "
                                "chromium package (apt-get install chromium)")
    src, dst = Path(html).resolve(), Path(pdf)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "page.pdf"
        cmd = [*browser_command(browser, Path(tmp) / "profile"), "--no-pdf-header-footer",
               f"--print-to-pdf={out}", src.as_uri()]
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise PrivlabError(f"Chromium could not print {src} to PDF: {exc}") from None
        data = out.read_bytes() if out.exists() else b""
    if not data.startswith(b"%PDF"):
        raise PrivlabError(f"Chromium wrote no PDF for {src}")
    with atomic_open(dst, "wb", encoding=None) as fh:
        fh.write(data)
    return dst
