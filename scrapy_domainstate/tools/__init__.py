"""What a user runs beside a crawl: the ``scrapy domainstate`` command, the Python API,
the HTML report and CSV import/export. Tools read and write stores; they never import the
runtime.
"""
