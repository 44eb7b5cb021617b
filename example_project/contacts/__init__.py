"""An example Scrapy project: collect contact data from many websites, with scrapy-domainstate."""
