"""Scrapy commands of the plugin: ``scrapy domainstate`` (registered via the ``scrapy.commands`` entry point)."""
