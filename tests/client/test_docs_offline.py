"""/docs, /redoc and the landing page work without internet access: every
asset they load is served by the service itself."""
from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import httpx
import pytest

from service.app import create_app
from tests.backends.localkit import settings_for, thread_server

# What these pages are is the question here, not how fast they come: a megabyte of ReDoc on a
# busy 2-core machine took longer than httpx's default 5 s once, and so did the landing page
# (a fresh-clone run whose Slurm tests ran 45 % slower than the run before). Every request waits this.
TIMEOUT = 60


@pytest.fixture
def server(tmp_path, sqlite_template_db):
    """The pages touch no database: SQLite alone is enough."""
    db = tmp_path / "docs.db"
    db.write_bytes(sqlite_template_db.read_bytes())
    with thread_server(create_app(settings_for(f"sqlite:///{db}", tmp_path / "runs"))) as url:
        yield url


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("src", "href", "spec-url") and v]


def refs(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    return parser.refs


@pytest.mark.parametrize("page,assets", [("/docs", {"swagger-ui-bundle.js", "swagger-ui.css"}),
                                         ("/redoc", {"redoc.standalone.js"})])
def test_docs_pages_load_only_from_this_service(server, page, assets):
    r = httpx.get(server + page, timeout=TIMEOUT)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    found = refs(r.text)
    assert found and all(ref.startswith("/") and not ref.startswith("//") for ref in found), found
    # Nothing in the page's own scripts or styles reaches out either (Swagger UI's validator badge).
    assert not re.search(r"https?://", r.text), re.findall(r"https?://\S+", r.text)
    assert '"validatorUrl": null' in r.text or page == "/redoc"
    assert assets <= {ref.rsplit("/", 1)[1] for ref in found}
    for ref in found:
        served = httpx.get(server + ref, timeout=TIMEOUT)
        assert served.status_code == 200, ref
        if ref.endswith(".js"):
            assert "javascript" in served.headers["content-type"] and len(served.content) > 100_000
    assert "/openapi.json" in r.text


def test_landing_page_links_docs_and_health(server):
    r = httpx.get(server + "/", timeout=TIMEOUT)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    links = refs(r.text)
    for path in ("/docs", "/redoc", "/openapi.json", "/problems", "/healthz", "/readyz", "/metrics"):
        assert path in links
        # /openapi.json is built on its first request (~1 s of CPU; httpx waits 5 s by default).
        assert httpx.get(server + path, timeout=TIMEOUT).status_code == 200, path
    assert not [ref for ref in links if not ref.startswith("/")]
    assert f"trainjobs login --url {server}" in r.text
    assert "/ui" in links  # the web UI, first
    # Without a session the UI sends a person to its sign-in page.
    ui = httpx.get(server + "/ui", follow_redirects=True, timeout=TIMEOUT)
    assert ui.status_code == 401 and "/ui/login" in ui.text
    assert httpx.get(server + "/ui/login", timeout=TIMEOUT).status_code == 200


# A URL a script or stylesheet would fetch by itself: an image, script, style or font source,
# a CSS url(). Links a person may click (ReDoc's "API docs by Redocly") are not loads.
_REMOTE_LOAD = re.compile(rb"""(?:\bsrc\s*[:=]\s*|url\(\s*)["']?(?:https?:)?//(?!127\.0\.0\.1)[^"')\s]+""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_no_asset_a_docs_page_loads_fetches_from_another_host(server, page):
    """ReDoc's bundle shows Redocly's logo from its CDN: served here pointing at our icon."""
    for ref in refs(httpx.get(server + page, timeout=TIMEOUT).text):
        if ref.endswith((".js", ".css")):
            served = httpx.get(server + ref, timeout=TIMEOUT).content
            assert not _REMOTE_LOAD.findall(served), (ref, _REMOTE_LOAD.findall(served)[:5])
    logo = httpx.get(server + "/docs-assets/favicon.png", timeout=TIMEOUT)
    assert logo.status_code == 200 and logo.headers["content-type"] == "image/png"


def test_the_pattern_catches_the_unpatched_redoc_logo():
    from service.web.docs import ASSETS, REDOC_BUNDLE
    assert _REMOTE_LOAD.findall((ASSETS / REDOC_BUNDLE).read_bytes())


def test_tags_in_the_order_a_newcomer_reads(server):
    doc = httpx.get(server + "/openapi.json", timeout=TIMEOUT).json()   # built on first request: slow on a busy host
    tags = [t["name"] for t in doc["tags"]]
    assert tags[:4] == ["jobs", "templates", "logs", "sweeps"] and tags[-1] == "interop"
    used = {tag for ops in doc["paths"].values() for op in ops.values() for tag in op.get("tags", [])}
    assert used <= set(tags), used - set(tags)  # an unlisted tag would go wherever ReDoc puts it
    assert "x-logo" not in doc["info"]  # a logo there would be loaded from wherever it points


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian package chromium)")
@pytest.mark.parametrize("page,expect", [("/docs", "jobs_create"), ("/redoc", "Launch a job from a template")])
def test_docs_render_in_a_browser_with_every_other_host_unreachable(server, page, expect):
    # Any host but 127.0.0.1 fails to resolve: a CDN reference would leave the page blank.
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                           "--virtual-time-budget=20000", "--dump-dom", server + page],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout
