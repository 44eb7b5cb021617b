"""Scrapy's real engine: end-to-end crawls on the loopback sites, the shell, the manager glue."""
