"""Sphinx configuration: the reference and background pages (the README is the user's page)."""

from __future__ import annotations

project = "scrapy-domainstate"
author = "scrapy-domainstate developers"
copyright = "2026, scrapy-domainstate developers"
extensions: list[str] = []
exclude_patterns = ["_build", "SPEC.md", "ANTIBOT-MARKERS.md"]
source_suffix = {".rst": "restructuredtext"}
master_doc = "index"
html_theme = "alabaster"
html_static_path: list[str] = []
nitpicky = True
