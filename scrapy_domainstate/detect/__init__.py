"""What a response says: the anti-bot classifier, its markers, the scan engines, the contact
scan and the evidence rules that turn a verdict into an outcome.

Pure: imports only the core floor, never Scrapy or Twisted.
"""
