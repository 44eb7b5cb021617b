"""The per-crawl runtime behind the Scrapy components: lifecycle, requests and outcomes,
and the helpers each flow uses (probes, the send gate, the browser route, politeness).

The only floor that talks to Scrapy's engine; nothing below it imports it.
"""
