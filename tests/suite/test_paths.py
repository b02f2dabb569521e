"""The data folders are found in a checkout and, for a wheel, under the installation prefix."""

from __future__ import annotations

import site
import sys

from conformance import paths


def test_a_checkout_uses_its_own_folders():
    assert paths.data_dir("spec") == paths.CHECKOUT / "spec"
    assert (paths.data_dir("fixtures") / "layouts.json").is_file()


def test_an_installed_wheel_uses_the_prefixs_share_folder(tmp_path, monkeypatch):
    installed = tmp_path / "prefix" / "share" / "shardspec" / "spec"
    installed.mkdir(parents=True)
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert paths.data_dir("spec") == installed


def test_a_missing_folder_is_named_where_a_checkout_would_have_it(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "nowhere"))
    monkeypatch.setattr(site, "USER_BASE", str(tmp_path / "nowhere"))
    assert paths.data_dir("fixtures") == tmp_path / "fixtures"
