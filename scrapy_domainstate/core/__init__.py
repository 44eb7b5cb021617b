"""The pure floor: the record vocabulary, the policy and its rules, keys, settings, time.

Nothing here imports Scrapy or Twisted, does I/O or keeps process-wide state: every
other floor builds on it.
"""
