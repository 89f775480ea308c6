"""Debian's file formats as the rootfs builder reads them: apt sources, Release, dpkg status."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

APT_ROOT = "/etc/apt"


def stanzas(text: str) -> Iterator[dict[str, str]]:
    """The stanzas of a deb822 document (dpkg status, apt ``.sources``), in order.

    Field names keep their spelling; a continuation line (one starting with a space or a tab)
    is joined to its field's value by a newline. Comment lines (``#``) are skipped, as apt
    skips them; dpkg's status file has none.

    Args:
        text: the document.

    Yields:
        one ``{field: value}`` per stanza; a stanza with no fields is not yielded.
    """
    stanza: dict[str, str] = {}
    field = None
    for line in text.splitlines():
        if not line.strip():
            if stanza:
                yield stanza
            stanza, field = {}, None
        elif line.startswith("#"):
            continue
        elif line[0] in " \t":
            if field is not None:
                stanza[field] += "\n" + line.strip()
        elif ":" in line:
            field, _, value = line.partition(":")
            field = field.strip()
            stanza[field] = value.strip()
    if stanza:
        yield stanza


def installed(status_text: str, native: str | None = None) -> dict[str, str]:
    """The packages dpkg's status file says are installed, as ``{name: version}``.

    Only stanzas whose ``Status`` ends in ``installed`` count: a package removed but not
    purged (``deinstall ok config-files``), half-installed or unpacked is not installed. A
    package of a foreign architecture is named ``name:arch`` (``Multi-Arch: same`` packages
    may be installed once per architecture); the native and ``all`` ones by their name alone.

    Args:
        status_text: the text of ``var/lib/dpkg/status``.
        native: the tree's dpkg architecture; None names every package by its name alone.

    Returns:
        the installed packages, sorted by name.
    """
    found = {}
    for stanza in stanzas(status_text):
        status = stanza.get("Status", "").split()
        if len(status) != 3 or status[2] != "installed":
            continue
        name, version = stanza.get("Package"), stanza.get("Version")
        if not name or not version:
            continue
        architecture = stanza.get("Architecture", "all")
        if native is not None and architecture not in (native, "all"):
            name = f"{name}:{architecture}"
        found[name] = version
    return dict(sorted(found.items()))


def _one_line_sources(text: str) -> Iterator[tuple[str, list[str]]]:
    """(URI, suites) of each ``deb`` line of a one-line-style sources.list."""
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 2:
            yield words[0], [words[1]]


def _deb822_sources(text: str) -> Iterator[tuple[str, list[str]]]:
    """(URI, suites) of each enabled ``deb`` stanza of a deb822-style ``.sources`` file."""
    for stanza in stanzas(text):
        if stanza.get("Enabled", "yes").lower() == "no":
            continue
        if "deb" not in stanza.get("Types", "").split():
            continue
        for uri in stanza.get("URIs", "").split():
            yield uri, stanza.get("Suites", "").split()


def host_mirror(suite: str, apt_root: str | None = None) -> str | None:
    """The first mirror the host's apt sources name for ``suite``, or None.

    Reads ``sources.list`` and then ``sources.list.d/*.list`` and ``*.sources`` in name
    order, as apt does; a file that cannot be read is passed over (a host's sources are a
    default, never a requirement).

    Args:
        suite: a suite or codename exactly as the sources spell it (``bookworm``).
        apt_root: the folder holding apt's configuration (None: ``APT_ROOT``).

    Returns:
        the mirror's URI without a trailing slash, or None when no source names the suite.
    """
    apt_root = APT_ROOT if apt_root is None else apt_root
    files = [os.path.join(apt_root, "sources.list")]
    folder = os.path.join(apt_root, "sources.list.d")
    try:
        files += [os.path.join(folder, name) for name in sorted(os.listdir(folder))]
    except OSError:
        pass  # no sources.list.d: the main file alone
    for path in files:
        if path.endswith(".sources"):
            parse = _deb822_sources
        elif path.endswith(".list"):
            parse = _one_line_sources
        else:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        for uri, suites in parse(text):
            if suite in suites:
                return uri.rstrip("/")
    return None


_DATE = re.compile(r"^Date:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def release_date(release_text: str) -> int | None:
    """The ``Date`` of a Release (or InRelease) file in seconds since the epoch, or None.

    The date is read, not trusted: it only fixes SOURCE_DATE_EPOCH, and apt inside the build
    verifies the file's signature itself.

    Args:
        release_text: the file's text (its first kilobytes are enough).

    Returns:
        the date, or None when the file has no ``Date`` field that parses.
    """
    found = _DATE.search(release_text)
    if not found:
        return None
    try:
        moment = parsedate_to_datetime(found.group(1))
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None  # Debian writes UTC; a date without a zone is not one of its files
    return int(moment.timestamp())
