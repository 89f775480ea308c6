"""Debian's file formats as the rootfs builder reads them: sources, Release dates, dpkg status."""

from __future__ import annotations

from pathlib import Path

from yyb.harness.environments import debian

# Shaped like a real var/lib/dpkg/status: multi-line fields, a conffile list, a package
# removed but not purged, a half-configured one, a foreign Multi-Arch: same library.
STATUS = """\
Package: base-files
Essential: yes
Status: install ok installed
Priority: required
Section: admin
Installed-Size: 341
Maintainer: Santiago Vila <sanvila@debian.org>
Architecture: amd64
Multi-Arch: foreign
Version: 12.4+deb12u10
Replaces: base, dpkg (<= 1.15.0), miscutils
Provides: base
Conffiles:
 /etc/debian_version 4ee6d3a1b4c5d7b7c8e8a9d6f1e2a3b4
 /etc/dot.bashrc 5a0b4b4e6c0c6ff8c1d9a5f3e2c1b0a9
Description: Debian base system miscellaneous files
 This package contains the basic filesystem hierarchy of a Debian system, and
 several important miscellaneous files.

Package: python3.11-minimal
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 3.11.2-6+deb12u6
Description: Minimal subset of the Python language (version 3.11)

Package: oldtool
Status: deinstall ok config-files
Priority: optional
Architecture: amd64
Version: 1.0-1
Config-Version: 1.0-1

Package: tzdata
Status: install ok half-configured
Architecture: all
Version: 2025b-0+deb12u1

Package: libc6
Status: install ok installed
Architecture: i386
Multi-Arch: same
Version: 2.36-9+deb12u10

Package: debconf
Status: install ok installed
Architecture: all
Version: 1.5.82
"""


def test_installed_keeps_installed_stanzas_only_with_their_versions():
    assert debian.installed(STATUS, "amd64") == {
        "base-files": "12.4+deb12u10",
        "debconf": "1.5.82",
        "libc6:i386": "2.36-9+deb12u10",
        "python3.11-minimal": "3.11.2-6+deb12u6",
    }


def test_installed_without_an_architecture_names_packages_alone():
    assert "libc6" in debian.installed(STATUS)
    assert "oldtool" not in debian.installed(STATUS)


def test_installed_skips_stanzas_without_name_version_or_status():
    text = "Package: a\nStatus: install ok installed\n\nVersion: 1\nStatus: install ok installed\n"
    text += "\nPackage: c\nVersion: 2\n\nPackage: d\nVersion: 3\nStatus: installed\n"
    assert debian.installed(text) == {}


def test_stanzas_join_continuations_and_skip_comments():
    text = "# a comment\nA: 1\nB: x\n y\n\n\n\nC: 3\n"
    assert list(debian.stanzas(text)) == [{"A": "1", "B": "x\ny"}, {"C": "3"}]


def test_host_mirror_reads_deb822_and_one_line_sources(tmp_path: Path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian trixie main\n"
        "deb-src http://src.example/debian trixie main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian/ bullseye main\n"
    )
    (tmp_path / "sources.list.d" / "a.sources").write_text(
        "Types: deb\nURIs: http://off.example/debian\nSuites: trixie\nEnabled: no\n\n"
        "Types: deb-src deb\nURIs: http://on.example/debian\n"
        "Suites: trixie trixie-updates\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "b.list.disabled").write_text("deb http://x.example/ sid main\n")
    assert debian.host_mirror("bullseye", str(tmp_path)) == "http://one.example/debian"
    assert debian.host_mirror("trixie", str(tmp_path)) == "http://on.example/debian"
    assert debian.host_mirror("trixie-updates", str(tmp_path)) == "http://on.example/debian"
    assert debian.host_mirror("sid", str(tmp_path)) is None
    assert debian.host_mirror("bookworm", str(tmp_path / "missing")) is None


def test_release_date_reads_the_date_field():
    text = (
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Debian\n"
        "Suite: stable\nCodename: bookworm\nDate: Sat, 10 May 2025 09:15:26 UTC\n"
        "Valid-Until: Sat, 17 May 2025 09:15:26 UTC\n"
    )
    assert debian.release_date(text) == 1746868526


def test_release_date_refuses_missing_or_bad_dates():
    assert debian.release_date("Origin: Debian\n") is None
    assert debian.release_date("Date: yesterday\n") is None
    assert debian.release_date("Date: Sat, 10 May 2025 09:15:26\n") is None  # no zone
