"""Write docs/settings.md's list of every TRAINJOBS_* variable from the settings sections.

    .venv/bin/python scripts/settings_doc.py           # rewrite the list
    .venv/bin/python scripts/settings_doc.py --check   # exit 1 if it is stale (tests/core/test_settings_doc.py)

Only the part between the two markers is written; the prose around it is the page's own."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "settings.md"
BEGIN = "<!-- BEGIN the list: written by scripts/settings_doc.py from the sections; edit the sections, not this -->"
END = "<!-- END the list -->"


def rewritten(page: str, listing: str) -> str:
    """`page` with the part between the markers replaced by `listing`."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing")
    return f"{head}{BEGIN}\n\n{listing.rstrip()}\n\n{END}{tail}"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from service.core.section import document
    from service.slices import Settings

    page = DOC.read_text()
    new = rewritten(page, document(Settings))
    if "--check" in argv:
        if new != page:
            print(f"{DOC.relative_to(ROOT)} is stale: run .venv/bin/python scripts/settings_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
