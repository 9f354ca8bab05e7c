"""The review page in a real browser: headless Chromium renders it (a screenshot at 1280 px), prints it to PDF and
dumps its DOM, in which every section and one table of cells per released table must be present.  The page may
ask for nothing outside itself: every src and href is a data: URI or an anchor, and no CSS imports or loads a url.
Skipped, with the reason, where /usr/bin/chromium is absent."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from dphist.products.review import SECTIONS

from cli_harness import invoke
from conftest import write

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          timeout=60, check=False)


def pdf_pages(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


@pytest.mark.time_limit(30)  # three browser runs; about 10 s on a quiet machine
def test_the_page_renders_prints_and_holds_every_section_and_table(tmp_path):
    write(tmp_path, "schema.yaml", "columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 5}\n"
                                   "  sex: {type: categorical, values: [F, M]}\n")
    write(tmp_path, "data.csv", "age,sex\n" + "".join(f"{(i * 37) % 100},{'FM'[i % 2]}\n" for i in range(300)))
    rel = tmp_path / "rel"
    made = invoke(["release", str(tmp_path / "data.csv"), "-s", str(tmp_path / "schema.yaml"), "--rho", "0.5",
                   "--marginals", "age;age,sex", "--seed", "2", "-q", "-o", str(rel)])
    assert made.exit_code == 0, made.output
    page = tmp_path / "page.html"
    assert invoke(["review", str(rel), "-o", str(page)]).exit_code == 0
    html = page.read_text(encoding="utf-8")

    # nothing from outside: every reference is inline or an anchor
    for target in re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", html, flags=re.I):
        assert target.startswith(("data:", "#")), target
    assert "@import" not in html and not re.search(r"url\((?!\s*['\"]?data:)", html)
    assert not re.search(r"""["'(]\s*(?:https?:)?//""", html)

    dom = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout.decode("utf-8")
    for sid, _ in SECTIONS:
        assert f'id="{sid}"' in text, sid
    assert len(re.findall(r'<table class="cells" data-table="\d+">', text)) == 2
    assert "TEST MODE" in text

    shot = tmp_path / "page.png"
    assert chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()).returncode == 0
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", data[16:20])[0] == 1280

    pdf = tmp_path / "page.pdf"
    printed = chromium(tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri())
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert pdf.read_bytes()[:5] == b"%PDF-" and 2 <= pdf_pages(pdf.read_bytes()) <= 40
