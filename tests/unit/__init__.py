"""Pure modules (policy, records, keys, settings, classification, evidence, routing): no reactor, no crawl."""
